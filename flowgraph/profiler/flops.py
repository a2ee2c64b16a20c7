"""Registered op statistics, and the float-operation counts of TensorFlow's profiler.

TF1 registers one function per (op type, statistic) with `ops.RegisterStatistics("MatMul",
"flops")`; the profiler calls it with the graph and the op's NodeDef and gets an `OpStats`.
The counts below are TensorFlow's (tensorflow/python/profiler/internal/flops_registry.py), so a
model's reported FLOPs are the same as under TensorFlow:

    element-wise unary        elements of input 0 x ops per element (Rsqrt 2, Softmax 5)
    element-wise binary       elements of the output x ops per element (SquaredDifference 2)
    reductions                in x reduce + out x (finalize - reduce)  (Mean finalizes: 1)
    MatMul, BatchMatMul       2 x k x elements of the output
    Conv2D, Depthwise         2 x output elements x kernel area x in channels (x multiplier)
    pools                     kernel area x output elements

A statistic needs fully known shapes; the profiler first fills unknown graph shapes from the
RunMetadata of a traced step. Ops without a registered count have none (not zero).
"""

from __future__ import annotations

import math

from flowgraph.core import registry

__all__ = [
    "OpStats",
    "RegisterStatistics",
    "get_stats_for_node_def",
    "tensor_shape_from_node_def_name",
]

# (op type, statistic type) -> fn(graph, node_def) -> OpStats
_STATISTICS = registry.Registry(
    "statistic",
    op_type_of=lambda key: key[0],
    summary=lambda key, fn: key[1],
    key_text=lambda key: f"{key[1]!r} of {key[0]!r}",
)
registry.machinery(__file__)


class OpStats:
    """A statistic's value for one op, e.g. OpStats("flops", 2048); values add up."""

    def __init__(self, statistic_type, value=None):
        self.statistic_type = statistic_type
        self.value = value

    def __iadd__(self, other):
        if other.statistic_type != self.statistic_type:
            raise ValueError(
                f"Can't add an OpStat of type {other.statistic_type} to one of {self.statistic_type}."
            )
        if self.value is None:
            self.value = other.value
        elif other.value is not None:
            self.value += other.value
        return self

    def __repr__(self):
        return f"OpStats({self.statistic_type!r}, {self.value!r})"


class RegisterStatistics:
    """Decorator: `@RegisterStatistics("MatMul", "flops")` on `fn(graph, node_def) -> OpStats`."""

    def __init__(self, op_type, statistic_type):
        if not isinstance(op_type, str) or not isinstance(statistic_type, str):
            raise TypeError("op_type and statistic_type must be strings")
        self._key = (op_type, statistic_type)

    def __call__(self, fn):
        _STATISTICS.register(self._key, fn)
        return fn


def get_stats_for_node_def(graph, node, statistic_type) -> OpStats:
    """The registered statistic of NodeDef `node` in `graph`; an empty OpStats if none."""
    fn = _STATISTICS.get((node.op, statistic_type))
    return fn(graph, node) if fn is not None else OpStats(statistic_type)


def tensor_shape_from_node_def_name(graph, input_name):
    """The static shape of the tensor a NodeDef input string ('x', 'x:1') names."""
    name = input_name.lstrip("^")
    if ":" not in name:
        name += ":0"
    return graph.get_tensor_by_name(name).shape


def _elements(shape) -> int:
    if not shape.is_fully_defined():
        raise ValueError(f"shape {shape} is not fully defined")
    return math.prod(shape.as_list())


def _out(graph, node):
    return tensor_shape_from_node_def_name(graph, node.name)


def _in(graph, node, i=0):
    return tensor_shape_from_node_def_name(graph, node.input[i])


def _attr(node, key):
    return node.attr[key]


# -- element-wise ---------------------------------------------------------------------------
def _unary(ops_per_element):
    return lambda graph, node: OpStats("flops", _elements(_in(graph, node)) * ops_per_element)


def _binary(ops_per_element):
    return lambda graph, node: OpStats("flops", _elements(_out(graph, node)) * ops_per_element)


UNARY = {"Reciprocal": 1, "Square": 1, "Rsqrt": 2, "Log": 1, "Neg": 1, "AssignSub": 1}
UNARY |= {"AssignAdd": 1, "Softmax": 5}
BINARY = {
    "Add": 1,
    "AddV2": 1,
    "Sub": 1,
    "Mul": 1,
    "RealDiv": 1,
    "Maximum": 1,
    "Minimum": 1,
    "Pow": 1,
    "RsqrtGrad": 4,
    "GreaterEqual": 1,
    "Greater": 1,
    "LessEqual": 1,
    "Less": 1,
    "Equal": 1,
    "NotEqual": 1,
    "SquaredDifference": 2,
    "BiasAdd": 1,
}
for _op, _n in UNARY.items():
    RegisterStatistics(_op, "flops")(_unary(_n))
for _op, _n in BINARY.items():
    RegisterStatistics(_op, "flops")(_binary(_n))


@RegisterStatistics("L2Loss", "flops")
def _l2_loss(graph, node):
    return OpStats("flops", _elements(_in(graph, node)) * 3 - 1)  # x*x, sum, halve


# -- reductions -----------------------------------------------------------------------------
def _reduction(reduce_flops, finalize_flops):
    def stat(graph, node):
        n_in, n_out = _elements(_in(graph, node)), _elements(_out(graph, node))
        return OpStats("flops", n_in * reduce_flops + n_out * (finalize_flops - reduce_flops))

    return stat


REDUCTIONS = {"Mean": (1, 1), "Sum": (1, 0), "ArgMax": (1, 0), "ArgMin": (1, 0)}
REDUCTIONS["BiasAddGrad"] = (1, 0)
for _op, (_r, _f) in REDUCTIONS.items():
    RegisterStatistics(_op, "flops")(_reduction(_r, _f))


@RegisterStatistics("AddN", "flops")
def _add_n(graph, node):
    data_inputs = [i for i in node.input if not i.startswith("^")]
    if not data_inputs:
        return OpStats("flops", 0)
    return OpStats("flops", _elements(_in(graph, node)) * (len(data_inputs) - 1))


# -- matrix products and convolutions --------------------------------------------------------
@RegisterStatistics("MatMul", "flops")
def _mat_mul(graph, node):
    a = _in(graph, node).as_list()
    k = a[0] if _attr(node, "transpose_a").b else a[1]
    return OpStats("flops", 2 * k * _elements(_out(graph, node)))


def _batch_mat_mul(graph, node):
    a = _in(graph, node).as_list()
    adjoint = _attr(node, "adj_x").b if "adj_x" in node.attr else False
    k = a[-2] if adjoint else a[-1]
    return OpStats("flops", 2 * k * _elements(_out(graph, node)))


for _op in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
    RegisterStatistics(_op, "flops")(_batch_mat_mul)


def _nhwc(node):
    fmt = _attr(node, "data_format").s if "data_format" in node.attr else b"NHWC"
    if fmt not in (b"", b"NHWC"):
        raise ValueError(f"flops of {node.op} are counted for NHWC only, got {fmt!r}")


@RegisterStatistics("Conv2D", "flops")
def _conv_2d(graph, node):
    _nhwc(node)
    kernel = _in(graph, node, 1).as_list()  # [h, w, in, out]
    return OpStats("flops", 2 * _elements(_out(graph, node)) * kernel[0] * kernel[1] * kernel[2])


@RegisterStatistics("DepthwiseConv2dNative", "flops")
def _depthwise_conv_2d(graph, node):
    _nhwc(node)
    kernel = _in(graph, node, 1).as_list()  # [h, w, in, multiplier]
    return OpStats("flops", 2 * _elements(_out(graph, node)) * kernel[0] * kernel[1])


def _strides_area(node) -> int:
    strides = list(_attr(node, "strides").list.i)
    return strides[1] * strides[2]


@RegisterStatistics("Conv2DBackpropInput", "flops")
def _conv_2d_backprop_input(graph, node):
    _nhwc(node)
    out = _out(graph, node)  # the input image's shape
    kernel = _in(graph, node, 1)
    n = 2 * _elements(out) * _elements(kernel) / (out.as_list()[-1] * _strides_area(node))
    return OpStats("flops", n)


@RegisterStatistics("Conv2DBackpropFilter", "flops")
def _conv_2d_backprop_filter(graph, node):
    _nhwc(node)
    image = _in(graph, node)
    kernel = _out(graph, node)
    n = 2 * _elements(image) * _elements(kernel) / (image.as_list()[-1] * _strides_area(node))
    return OpStats("flops", n)


# -- pooling ----------------------------------------------------------------------------------
def _kernel_area(node) -> int:
    return math.prod(_attr(node, "ksize").list.i)


@RegisterStatistics("AvgPool", "flops")
@RegisterStatistics("MaxPool", "flops")
def _pool(graph, node):
    _nhwc(node)
    return OpStats("flops", _kernel_area(node) * _elements(_out(graph, node)))


@RegisterStatistics("AvgPoolGrad", "flops")
def _avg_pool_grad(graph, node):
    _nhwc(node)
    out_backprop = _in(graph, node, 1)  # spread each gradient over its window, then divide
    return OpStats("flops", _kernel_area(node) * _elements(out_backprop) * 2)


@RegisterStatistics("MaxPoolGrad", "flops")
def _max_pool_grad(graph, node):
    _nhwc(node)
    orig_out = _in(graph, node, 1)  # redo the max pool, then route each gradient
    return OpStats("flops", _kernel_area(node) * _elements(orig_out) + _elements(orig_out))

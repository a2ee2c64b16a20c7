"""Gradients of TensorArray ops (TF's tensor_array_grad): the gradient of an array is another
array (TensorArrayGradV3, one per gradient computation, named by its `gradients` scope); a read
becomes a write into it, a write a read, gather a scatter, concat a split, and back. Gradients
reach the forward array's `flow`, so they travel through while loops with it."""

from __future__ import annotations

from flowgraph.core import registry
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.gradients import util
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.ops.tensor_array import TensorArray

# _reader_grad/_writer_grad register for the module-level lines below (`flowgraph describe`).
registry.machinery(__file__)

for _op in ("TensorArrayV3", "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayGradV3"):
    not_differentiable(_op)


def _grad_source(grad) -> str:
    """The top `gradients*` scope of the gradient: separate tf.gradients calls get separate arrays."""
    name = grad.op.name if hasattr(grad, "op") else ""
    parts = [p for p in name.split("/") if p.startswith("gradients")]
    return parts[0] if parts else "gradients"


def _grad_array(op, dtype, flow, source) -> TensorArray:
    return TensorArray(dtype, handle=op.inputs[0], flow=flow).grad(source=source, flow=flow)


def _after_write(op, flow_grad):
    """The incoming flow gradient, ordered after the forward write `op` (TF's write barrier):
    the gradient array must not be created before the last forward write happened."""
    flow_out = util.build("Identity", op.outputs[0], name="flow_out")
    with op.graph.control_dependencies([flow_out]):
        return util.build("Identity", flow_grad, name="write_barrier")


def _reader_grad(op_type, write):
    """Registers the gradient of a read-like op: `write(g, op, grad)` puts the incoming gradient
    into the gradient array `g`, and its flow is the gradient of the op's `flow_in`."""

    def grad_fn(op, grad, *_unused):
        g = _grad_array(op, op.get_attr("dtype"), op.inputs[-1], _grad_source(grad))
        return (None,) * (len(op.inputs) - 1) + (write(g, op, convert_to_tensor(grad)).flow,)

    register_gradient(op_type)(grad_fn)


def _writer_grad(op_type, read):
    """Registers the gradient of a write-like op: `read(g, op)` gives the gradients of the inputs
    between the handle and `flow_in`, read back out of the gradient array `g`."""

    def grad_fn(op, flow_grad):
        flow = _after_write(op, flow_grad)
        g = _grad_array(op, op.get_attr("T"), flow, _grad_source(flow_grad))
        return (None, *read(g, op), flow)

    register_gradient(op_type)(grad_fn)


# The dualities: read <-> write, gather <-> scatter, concat <-> split.
_reader_grad("TensorArrayReadV3", lambda g, op, grad: g.write(op.inputs[1], grad))
_reader_grad("TensorArrayGatherV3", lambda g, op, grad: g.scatter(op.inputs[1], grad))
_reader_grad("TensorArrayConcatV3", lambda g, op, grad: g.split(grad, op.outputs[1]))
_writer_grad("TensorArrayWriteV3", lambda g, op: (None, g.read(op.inputs[1])))
_writer_grad("TensorArrayScatterV3", lambda g, op: (None, g.gather(op.inputs[1])))
_writer_grad("TensorArraySplitV3", lambda g, op: (g.concat(), None))

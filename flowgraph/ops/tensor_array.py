"""tf.TensorArray: a list of tensors indexed inside loops (TF1's TensorArray over the V3 ops).

Every method that changes the array returns a new TensorArray object sharing the handle, with
the new `flow`; passing a TensorArray through `while_loop` threads its flow through the loop.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape, unknown_shape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor

__all__ = ["TensorArray"]


class TensorArray:
    """A per-step array of tensors of one dtype; see the module docstring."""

    def __init__(
        self,
        dtype,
        size=None,
        dynamic_size=None,
        clear_after_read=None,
        tensor_array_name=None,
        handle=None,
        flow=None,
        infer_shape=True,
        element_shape=None,
        colocate_with_first_write_call=True,
        name=None,
    ):
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        self._infer_shape = infer_shape
        self._element_shape = [
            as_shape(element_shape) if element_shape is not None else unknown_shape()
        ]
        if handle is not None:
            if flow is None:
                raise ValueError("flow must not be None if handle is not None.")
            if size is not None:
                raise ValueError("Cannot provide both a handle and size at the same time")
            self._handle, self._flow = handle, flow
            return
        if size is None:
            raise ValueError("Size must be provided if handle is not provided")
        if flow is not None:
            raise ValueError("Cannot provide both a flow and a size at the same time")
        graph = default_graph.get()
        with graph.name_scope(name or "TensorArray") as scope:
            op = apply_op(
                "TensorArrayV3",
                [convert_to_tensor(size, dtypes.int32, name="size")],
                name=scope,
                dtype=self._dtype,
                element_shape=self._element_shape[0],
                dynamic_size=bool(dynamic_size),
                clear_after_read=clear_after_read is not False,
                tensor_array_name=tensor_array_name or "",
            )
        self._handle, self._flow = op.outputs

    # -- identity -----------------------------------------------------------------------------
    @property
    def handle(self):
        return self._handle

    @property
    def flow(self):
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def element_shape(self) -> TensorShape:
        return self._element_shape[0]

    def _with_flow(self, flow) -> TensorArray:
        ta = TensorArray(self._dtype, handle=self._handle, flow=flow, infer_shape=self._infer_shape)
        ta._element_shape = self._element_shape  # shared: shape learnt from one write serves all
        return ta

    def _merge_element_shape(self, shape):
        if self._infer_shape:
            self._element_shape[0] = self._element_shape[0].merge_with(shape)

    def identity(self) -> TensorArray:
        return self._with_flow(apply_op("Identity", [self._flow]).outputs[0])

    # -- reading -----------------------------------------------------------------------------
    def read(self, index, name=None):
        value = apply_op(
            "TensorArrayReadV3",
            [self._handle, convert_to_tensor(index, dtypes.int32), self._flow],
            name=name or "TensorArrayReadV3",
            dtype=self._dtype,
        ).outputs[0]
        value._shape = self.element_shape
        return value

    def gather(self, indices, name=None):
        return apply_op(
            "TensorArrayGatherV3",
            [self._handle, convert_to_tensor(indices, dtypes.int32), self._flow],
            name=name or "TensorArrayGatherV3",
            dtype=self._dtype,
            element_shape=self.element_shape,
        ).outputs[0]

    def stack(self, name=None):
        """All elements stacked along a new dimension 0."""
        graph = self._handle.graph
        with graph.name_scope(name or "TensorArrayStack"):
            from flowgraph.ops import array as array_ops

            return self.gather(array_ops.range(0, self.size()), name=name)

    def concat(self, name=None):
        return apply_op(
            "TensorArrayConcatV3",
            [self._handle, self._flow],
            name=name or "TensorArrayConcatV3",
            dtype=self._dtype,
            element_shape_except0=self.element_shape[1:],
        ).outputs[0]

    def size(self, name=None):
        return apply_op(
            "TensorArraySizeV3", [self._handle, self._flow], name=name or "TensorArraySizeV3"
        ).outputs[0]

    # -- writing -----------------------------------------------------------------------------
    def write(self, index, value, name=None) -> TensorArray:
        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        self._merge_element_shape(value.shape)
        flow = apply_op(
            "TensorArrayWriteV3",
            [self._handle, convert_to_tensor(index, dtypes.int32), value, self._flow],
            name=name or "TensorArrayWriteV3",
        ).outputs[0]
        return self._with_flow(flow)

    def scatter(self, indices, value, name=None) -> TensorArray:
        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        self._merge_element_shape(value.shape[1:])
        flow = apply_op(
            "TensorArrayScatterV3",
            [self._handle, convert_to_tensor(indices, dtypes.int32), value, self._flow],
            name=name or "TensorArrayScatterV3",
        ).outputs[0]
        return self._with_flow(flow)

    def unstack(self, value, name=None) -> TensorArray:
        """Writes value[i] to index i."""
        from flowgraph.ops import array as array_ops

        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        graph = self._handle.graph
        with graph.name_scope(name or "TensorArrayUnstack"):
            n = array_ops.shape(value)[0]
            return self.scatter(array_ops.range(0, n), value, name=name)

    def split(self, value, lengths, name=None) -> TensorArray:
        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        lengths = convert_to_tensor(lengths, dtype=dtypes.int64, name="lengths")
        flow = apply_op(
            "TensorArraySplitV3",
            [self._handle, value, lengths, self._flow],
            name=name or "TensorArraySplitV3",
        ).outputs[0]
        return self._with_flow(flow)

    def grad(self, source, flow=None, name=None) -> TensorArray:
        flow = self._flow if flow is None else flow
        handle, out_flow = apply_op(
            "TensorArrayGradV3", [self._handle, flow], name=name or "TensorArrayGrad", source=source
        ).outputs
        ta = TensorArray(self._dtype, handle=handle, flow=out_flow, infer_shape=self._infer_shape)
        ta._element_shape = self._element_shape
        return ta

    def close(self, name=None):
        return apply_op("TensorArrayCloseV3", [self._handle], name=name or "TensorArrayCloseV3")

    def __repr__(self):
        return f"<TensorArray {self._handle.op.name} dtype={self._dtype.name}>"

"""DT_RESOURCE tensors as TensorProtos (issue 8, FORMATS.md §1.4): one ResourceHandleProto per
element in resource_handle_val (field 14), for any shape, and back; the in-memory messages
and the streamed RecvTensor carry them like any value."""

import numpy as np
import pytest

from flowgraph.core.protos import DataType, ResourceHandleProto, TensorProto
from flowgraph.core.resource_handle import ResourceHandle
from flowgraph.core.tensor_util import make_ndarray, make_tensor_proto
from flowgraph.distributed import messages, tensor_stream

PS = "/job:ps/replica:0/task:0/device:CPU:0"


def _handles(shape):
    flat = np.empty(int(np.prod(shape)), dtype=object)
    flat[:] = [ResourceHandle(PS, "localhost", f"v{i}", "VariableState") for i in range(flat.size)]
    return flat.reshape(shape)


def test_a_scalar_handle_is_one_resource_handle_val():
    h = ResourceHandle(PS, "localhost", "v", "VariableState")
    proto = make_tensor_proto(h)
    assert proto.dtype == DataType.DT_RESOURCE and not proto.tensor_shape.dim
    assert list(proto.resource_handle_val) == [h.to_proto()]
    wire = TensorProto.FromString(proto.SerializeToString())
    # field 14, length-delimited (tag 0x72), as TensorFlow writes it
    assert b"\x72" + bytes([h.to_proto().ByteSize()]) in proto.SerializeToString()
    got = make_ndarray(wire)
    assert got.shape == () and got.dtype == object and got[()] == h


@pytest.mark.parametrize("shape", [(3,), (2, 2), (0,), (1, 0, 2)])
def test_handles_of_any_shape_round_trip(shape):
    value = _handles(shape)
    # the handles say their type; an empty object array cannot, so it is given
    proto = make_tensor_proto(value, dtype=None if value.size else DataType.DT_RESOURCE)
    assert proto.dtype == DataType.DT_RESOURCE
    assert len(proto.resource_handle_val) == value.size  # every element, never a splat
    got = make_ndarray(TensorProto.FromString(proto.SerializeToString()))
    assert got.shape == shape and got.tolist() == value.tolist()


def test_wrong_values_and_encodings_are_refused():
    with pytest.raises(TypeError, match="expected a ResourceHandle"):
        make_tensor_proto(np.array(["x"], dtype=object), dtype=DataType.DT_RESOURCE)
    content = TensorProto(dtype=DataType.DT_RESOURCE, tensor_content=b"\x05\x00")
    content.tensor_shape.dim.add(size=1)
    with pytest.raises(ValueError, match="does not hold 1 handles"):
        make_ndarray(content)
    empty = TensorProto(dtype=DataType.DT_RESOURCE)
    empty.tensor_shape.dim.add(size=2)
    with pytest.raises(ValueError, match="holds no handles"):
        make_ndarray(empty)


def test_a_handle_feed_and_fetch_cross_the_wire_in_messages():
    h = ResourceHandle(PS, "__per_step_7", "arr_3", "TensorArray")
    req = messages.RunStepRequest("s", [("h:0", np.asarray(h, dtype=object))], ["r:0"], [])
    back = messages.RunStepRequest.from_proto(
        type(req.to_proto()).FromString(req.to_proto().SerializeToString())
    )
    assert back.feed[0][1][()] == h
    value, header = tensor_stream.decode(tensor_stream.encode(_handles((2,)), False))
    assert value.tolist() == _handles((2,)).tolist() and not header.is_dead
    proto = ResourceHandleProto.FromString(h.to_proto().SerializeToString())
    assert ResourceHandle.from_proto(proto) == h


# tf.io.serialize_tensor(tf.Variable([1.0, 2.0], name="vv").handle) from TensorFlow 2.x
# (eager): TF's own AsProtoTensorContent form of a DT_RESOURCE scalar, 105 bytes of
# tensor_content (a varint32 size, then the ResourceHandleProto with hash_code and
# dtypes_and_shapes, fields we keep as unknown).
TF_SERIALIZED_HANDLE = bytes.fromhex(
    "081412002269680a2c2f6a6f623a6c6f63616c686f73742f7265706c6963613a302f7461736b3a302f"
    "6465766963653a4350553a301209416e6f6e796d6f75731a0476762f3020e5f3a5f0afa4949ef2012a"
    "124e313074656e736f72666c6f77335661724532080801120412020802"
)


def test_tensorflow_s_tensor_content_form_is_read():
    proto = TensorProto.FromString(TF_SERIALIZED_HANDLE)
    assert proto.dtype == DataType.DT_RESOURCE and len(proto.tensor_content) == 105
    handle = make_ndarray(proto)[()]
    assert handle == ResourceHandle(
        "/job:localhost/replica:0/task:0/device:CPU:0", "Anonymous", "vv/0", "N10tensorflow3VarE"
    )

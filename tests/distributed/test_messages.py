"""The in-memory master/worker messages carry master.proto/worker.proto's field names, and
to_proto()/from_proto() (used only at the wire) round-trip them, tensors included."""

import inspect

import numpy as np
import pytest

from flowgraph.core.protos import ConfigProto, GraphDef, NodeDef, RunMetadata, RunOptions
from flowgraph.distributed import messages as m

MESSAGES = [
    cls
    for cls in vars(m).values()
    if inspect.isclass(cls) and issubclass(cls, m.Message) and cls is not m.Message
]


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_every_field_is_the_proto_s(cls):
    fields = {f.name for f in cls.proto_class().DESCRIPTOR.fields}
    assert set(cls._KINDS) <= fields
    assert cls.proto_class().DESCRIPTOR.name == cls.__name__


def _same(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, tuple):
        assert a[0] == b[0]
        _same(a[1], b[1])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def _roundtrip(msg):
    back = type(msg).from_proto(msg.to_proto())
    for field in type(msg)._KINDS:
        _same(getattr(msg, field), getattr(back, field))
    # and the proto survives serialization (what gRPC sends)
    proto = msg.to_proto()
    again = type(proto).FromString(proto.SerializeToString())
    assert again == proto
    return back


ARRAYS = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array(7, dtype=np.int64),
    np.array([True, False]),
    np.array([b"ab", b""], dtype=object),
    np.array([1 + 2j], dtype=np.complex128),
    np.zeros((0, 4), np.float64),
]


@pytest.mark.parametrize("value", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_tensors_round_trip_in_every_tensor_field(value):
    _roundtrip(m.RunStepRequest("s", [("x:0", value)], ["y:0"], ["t"], RunOptions(trace_level=3)))
    _roundtrip(m.RunStepResponse([("y:0", value)], RunMetadata()))
    _roundtrip(m.RunGraphRequest("s", True, "g", 12, m.ExecutorOpts(True), [("k", value)], ["q"]))
    _roundtrip(m.RunGraphResponse([("q", value)]))
    _roundtrip(m.RunCallableRequest("s", 3, [value, value]))
    _roundtrip(m.RunCallableResponse([value]))
    _roundtrip(m.RecvTensorResponse(value, False, 5))


def test_control_messages_round_trip():
    gd = GraphDef(node=[NodeDef(name="a", op="NoOp")])
    _roundtrip(m.CreateSessionRequest(gd, ConfigProto(operation_timeout_in_ms=9), "grpc://x"))
    _roundtrip(m.CreateSessionResponse("sess", 2))
    _roundtrip(m.ExtendSessionRequest("sess", gd, 2))
    _roundtrip(m.ExtendSessionResponse(3))
    _roundtrip(m.PartialRunSetupRequest("sess", ["a:0"], ["b:0"], ["c"]))
    _roundtrip(m.PartialRunSetupResponse("partial_run_1"))
    _roundtrip(m.RunStepRequest("sess", [], ["b:0"], partial_run_handle="partial_run_1"))
    _roundtrip(m.ResetRequest(["c1", "c2"], ["/job:ps"]))
    attrs = [m.DeviceAttributes("/job:w/replica:0/task:0/device:CPU:0", "CPU", 0, (1 << 64) - 3)]
    _roundtrip(m.ListDevicesResponse(attrs, attrs))
    _roundtrip(m.GetStatusResponse(attrs))
    opts = m.CallableOptions(["a:0"], ["b:0"], ["c"], RunOptions(timeout_in_ms=4))
    _roundtrip(m.MakeCallableRequest("sess", opts))
    _roundtrip(m.MakeCallableResponse(4))
    _roundtrip(m.ReleaseCallableRequest("sess", 4))
    _roundtrip(m.RegisterGraphRequest("sess", True, gd))
    _roundtrip(m.RegisterGraphResponse("sess/1"))
    _roundtrip(m.DeregisterGraphRequest("sess", True, "sess/1"))
    _roundtrip(m.CleanupGraphRequest(99))
    _roundtrip(m.CleanupAllRequest(["c"]))
    _roundtrip(m.CreateWorkerSessionRequest("sess"))
    _roundtrip(m.DeleteWorkerSessionRequest("sess"))
    _roundtrip(m.RecvTensorRequest(99, "a;0000000000000001;b;t;0:0", True))


def test_a_dead_tensor_travels_as_no_tensor():
    back = _roundtrip(m.RecvTensorResponse(None, True))
    assert back.tensor is None and back.is_dead
    assert not m.RecvTensorResponse(None, True).to_proto().HasField("tensor")


def test_registered_partitions_travel_decoded_in_process_and_encoded_on_the_wire():
    from flowgraph.runtime import nodes as rt_nodes

    gd = GraphDef(
        node=[NodeDef(name="a", op="NoOp", device="/job:w/replica:0/task:0/device:CPU:0")]
    )
    nodes = [rt_nodes.from_node_def(nd) for nd in gd.node]
    req = m.RegisterGraphRequest("sess", True, GraphDef(), nodes=nodes)
    proto = req.to_proto()
    assert [nd.name for nd in proto.graph_def.node] == ["a"]
    assert proto.graph_def.node[0].device == nodes[0].device
    back = m.RegisterGraphRequest.from_proto(proto)
    assert back.nodes is None and back.graph_def == proto.graph_def

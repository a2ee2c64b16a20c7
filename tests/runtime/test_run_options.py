"""RunOptions/ConfigProto settings the runtime honours: timeouts and device-placement logging."""

import pytest

import flowgraph as tf
from flowgraph.core.attr_value import to_attr_value
from flowgraph.core.protos import ConfigProto, GraphDef, NodeDef
from flowgraph.distributed import messages
from flowgraph.distributed.local import local_cluster

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _orphan_recv_graph() -> GraphDef:
    """A _Recv whose _Send never comes: the step can only end by its deadline."""
    nd = NodeDef(name="r", op="_Recv", device=CPU)
    for key, value, kind in [
        ("tensor_type", tf.float32, "type"),
        ("tensor_name", "nobody", "string"),
        ("send_device", CPU, "string"),
        ("recv_device", CPU, "string"),
        ("send_device_incarnation", 1, "int"),
        ("client_terminated", False, "bool"),
    ]:
        nd.attr[key].CopyFrom(to_attr_value(value, kind))
    return GraphDef(node=[nd])


@pytest.mark.parametrize("where", ["run_options", "config"])
def test_step_deadline(where):
    config = ConfigProto(operation_timeout_in_ms=100) if where == "config" else None
    cluster = local_cluster(config)
    master = cluster.master
    handle = master.create_session(
        messages.CreateSessionRequest(graph_def=_orphan_recv_graph(), config=config)
    ).session_handle
    options = tf.RunOptions(timeout_in_ms=100) if where == "run_options" else None
    with pytest.raises(tf.errors.DeadlineExceededError):
        master.run_step(messages.RunStepRequest(handle, fetch=["r:0"], options=options))
    master.close_session(messages.CloseSessionRequest(handle))
    cluster.close()


def test_log_device_placement(capsys):
    x = tf.constant(1.0, name="x")
    with tf.Session(config=tf.ConfigProto(log_device_placement=True)) as s:
        s.run(x + 1)
    assert f"x: (Const): {CPU}" in capsys.readouterr().err

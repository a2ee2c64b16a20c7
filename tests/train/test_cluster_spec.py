"""tf.train.ClusterSpec, ServerDef and replica_device_setter (with the tf.contrib.training
strategies): devices checked against what TensorFlow 2.21's tf.compat.v1 assigns."""

import pytest

import flowgraph as tf


def test_cluster_spec_dict_list_and_sparse_jobs():
    cluster = tf.train.ClusterSpec(
        {"ps": ["127.0.0.1:2222", "127.0.0.1:2225"], "worker": {1: "b:1", 3: "c:2"}}
    )
    assert cluster.jobs == ["ps", "worker"] and bool(cluster)
    assert cluster.num_tasks("worker") == 2 and cluster.task_indices("worker") == [1, 3]
    assert cluster.task_address("ps", 1) == "127.0.0.1:2225"
    assert cluster.job_tasks("worker") == [None, "b:1", None, "c:2"]
    assert cluster.as_dict() == {
        "ps": ["127.0.0.1:2222", "127.0.0.1:2225"],
        "worker": {1: "b:1", 3: "c:2"},
    }
    assert str(cluster) == (
        "ClusterSpec({'ps': ['127.0.0.1:2222', '127.0.0.1:2225'], 'worker': {1: 'b:1', 3: 'c:2'}})"
    )
    cluster_def = cluster.as_cluster_def()
    assert [job.name for job in cluster_def.job] == ["ps", "worker"]
    assert dict(cluster_def.job[1].tasks) == {1: "b:1", 3: "c:2"}
    # round trips through the proto and through another ClusterSpec
    assert tf.train.ClusterSpec(cluster_def) == cluster
    assert tf.train.ClusterSpec(cluster).as_dict() == cluster.as_dict()
    assert not tf.train.ClusterSpec({})


def test_cluster_spec_errors():
    cluster = tf.train.ClusterSpec({"worker": ["a:1"]})
    with pytest.raises(ValueError, match="No such job in cluster: 'ps'"):
        cluster.num_tasks("ps")
    with pytest.raises(ValueError, match="No task with index 3 in job 'worker'"):
        cluster.task_address("worker", 3)
    with pytest.raises(TypeError, match="must be a list or a dictionary"):
        tf.train.ClusterSpec({"worker": "a:1"})
    with pytest.raises(TypeError, match="`cluster` must be a dictionary"):
        tf.train.ClusterSpec(["a:1"])


def test_server_def_has_tensorflows_field_numbers():
    server_def = tf.train.ServerDef(
        cluster=tf.train.ClusterSpec({"w": ["h:1"]}).as_cluster_def(),
        job_name="w",
        task_index=0,
        protocol="grpc",
    )
    fields = {f.name: f.number for f in server_def.DESCRIPTOR.fields}
    assert fields == {
        "cluster": 1,
        "job_name": 2,
        "task_index": 3,
        "default_session_config": 4,
        "protocol": 5,
        "port": 6,
    }
    assert tf.train.ServerDef.FromString(server_def.SerializeToString()) == server_def


def test_replica_device_setter_places_like_tensorflow():
    cluster = tf.train.ClusterSpec({"ps": ["p:1", "p:2"], "worker": ["w:1"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        a = tf.Variable(1.0)
        b = tf.get_variable("b", [3], use_resource=True)
        x = a * 2
        with tf.device("/job:ps/task:7"):
            d = tf.Variable(3.0)
        with tf.device("/gpu:0"):
            y = x + 1
            e = tf.Variable(4.0)
    devices = [op.device for op in (a.op, a.initializer, b.op, x.op, d.op, y.op, e.op)]
    assert devices == [
        "/job:ps/task:0",
        "/job:ps/task:0",
        "/job:ps/task:1",
        "/job:worker",
        "/job:ps/task:7",
        "/job:worker/device:GPU:0",
        "/job:ps/task:1/device:GPU:0",
    ]
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["a:1"]}) is None
    with pytest.raises(TypeError, match="ps_strategy must be callable"):
        tf.train.replica_device_setter(ps_tasks=2, ps_strategy=3)


def test_worker_device_and_merge_devices():
    setter = tf.train.replica_device_setter(
        ps_tasks=3, ps_device="/job:ps/device:CPU:0", worker_device="/job:worker/task:2"
    )
    with tf.device(setter):
        v = [tf.Variable(float(i)) for i in range(4)]
        z = tf.add_n(v)
    assert [x.op.device for x in v] == [f"/job:ps/task:{t}/device:CPU:0" for t in (0, 1, 2, 0)]
    assert z.op.device == "/job:worker/task:2"
    keep = tf.train.replica_device_setter(ps_tasks=1, merge_devices=False)
    with tf.device(keep):
        with tf.device("/job:other"):  # an inner device stays as it is, not merged
            w = tf.Variable(1.0)
        u = tf.Variable(1.0)
    assert w.op.device == "/job:other" and u.op.device == "/job:ps/task:0"


def test_greedy_load_balancing_by_bytes():
    strategy = tf.contrib.training.GreedyLoadBalancingStrategy(
        2, tf.contrib.training.byte_size_load_fn
    )
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        big = tf.Variable(tf.zeros([100, 10]))  # 4000 bytes -> task 0
        small = [tf.Variable(tf.zeros([10])) for _ in range(3)]  # 40 bytes each -> task 1
        handle = tf.get_variable("h", [5], tf.float64, use_resource=True)  # 40 bytes -> task 1
    assert big.op.device == "/job:ps/task:0"
    assert [s.op.device for s in small] == ["/job:ps/task:1"] * 3
    assert handle.op.device == "/job:ps/task:1"
    assert tf.contrib.training.byte_size_load_fn(handle.op) == 40


def test_random_strategy_is_a_function_of_the_name():
    strategy = tf.contrib.training.RandomStrategy(3, seed=1)
    with tf.device(tf.train.replica_device_setter(ps_tasks=3, ps_strategy=strategy)):
        v = tf.Variable(1.0, name="weights")
    again = tf.contrib.training.RandomStrategy(3, seed=1)
    assert v.op.device == f"/job:ps/task:{again(v.op)}"

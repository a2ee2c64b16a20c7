"""tf.distribute.cluster_resolver from environment dicts. Expected values are what TensorFlow's
resolvers return for the same TF_CONFIG / SLURM_* variables (checked with TF 2.x, whose
resolvers are TF 1.15's plus the Slurm hostlist parser), except where noted: a node without
GPUs, and hostlists with a group inside a name, which TF's resolver cannot lay out."""

import json
import os
import re

import pytest

import flowgraph as tf
from flowgraph.distribute.cluster_resolver.slurm import expand_hostlist, expand_tasks_per_node

CR = tf.distribute.cluster_resolver
PS_WORKERS = {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]}


@pytest.fixture
def tf_config(monkeypatch):
    def set_config(config):
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))

    return set_config


@pytest.fixture
def slurm(monkeypatch):
    """Replaces the SLURM_* variables by the given ones (names without the prefix)."""

    def set_env(**env):
        for key in [k for k in os.environ if k.startswith("SLURM_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after the test...
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # ...even though the resolver sets it
        for key, value in env.items():
            monkeypatch.setenv("SLURM_" + key, value)

    return set_env


def test_tf_config_worker(tf_config):
    tf_config({"cluster": PS_WORKERS, "task": {"type": "worker", "index": 1}})
    r = CR.TFConfigClusterResolver()
    assert r.cluster_spec().as_dict() == PS_WORKERS
    assert (r.task_type, r.task_id, r.rpc_layer) == ("worker", 1, None)
    assert r.master() == "w1:2222"
    assert r.master("worker", 0, "grpc") == "grpc://w0:2222"
    r = CR.TFConfigClusterResolver(task_type="worker", task_id=0, rpc_layer="grpc")
    assert (r.task_type, r.task_id, r.master()) == ("worker", 0, "grpc://w0:2222")


def test_tf_config_rpc_layer_session_master_and_single_task(tf_config):
    tf_config({"cluster": PS_WORKERS, "task": {"type": "ps", "index": 0}, "rpc_layer": "grpc"})
    assert CR.TFConfigClusterResolver().master() == "grpc://ps0:2222"
    tf_config({"cluster": {"worker": ["w0:2222"]}, "task": {"type": "worker", "index": 0}})
    assert CR.TFConfigClusterResolver().master() == ""  # one task: run in process
    tf_config({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "session_master": "grpc://m:1"})
    r = CR.TFConfigClusterResolver()
    assert (r.master(), r.task_type, r.task_id) == ("grpc://m:1", None, None)


def test_tf_config_json_keys_and_absent_variable(tf_config, monkeypatch):
    tf_config(
        {
            "cluster": {"chief": ["c:1"], "worker": {"1": "w1:2", "3": "w3:2"}},
            "task": {"type": "chief", "index": "0"},
        }
    )
    r = CR.TFConfigClusterResolver()
    assert r.cluster_spec().as_dict() == {"chief": ["c:1"], "worker": {1: "w1:2", 3: "w3:2"}}
    assert (r.task_type, r.task_id, r.master()) == ("chief", 0, "c:1")
    with pytest.raises(ValueError, match="No task with index 0 in job 'worker'"):
        r.master("worker", 0)
    monkeypatch.delenv("TF_CONFIG")
    r = CR.TFConfigClusterResolver()
    assert (r.cluster_spec().as_dict(), r.master(), r.task_type) == ({}, "", None)
    assert r.num_accelerators() == {}  # lists the local devices: CPUs only


def test_simple_and_union_resolvers():
    a = CR.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": ["a:1", "b:1"]}),
        master="grpc://a:1",
        task_type="worker",
        task_id=1,
        num_accelerators={"GPU": 2},
    )
    b = CR.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": ["c:1"], "ps": ["p:1"]}), rpc_layer="grpc"
    )
    assert (a.master(), a.master("worker", 0), a.master("worker", 0, "grpc")) == (
        "grpc://a:1",
        "a:1",
        "grpc://a:1",
    )
    assert b.master("ps", 0) == "grpc://p:1"
    u = CR.UnionResolver(a, b)
    assert u.cluster_spec().as_dict() == {"worker": ["a:1", "b:1", "c:1"], "ps": ["p:1"]}
    assert (u.master(), u.master("ps", 0), u.task_type, u.task_id) == (
        "grpc://a:1",
        "p:1",
        "worker",
        1,
    )
    assert (u.num_accelerators(), u.rpc_layer) == ({"GPU": 2}, None)
    sparse = CR.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {3: "d:1"}}))
    merged = CR.UnionResolver(a, sparse).cluster_spec().as_dict()
    assert merged == {"worker": {0: "a:1", 1: "b:1", 3: "d:1"}}
    clash = CR.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {1: "d:1"}}))
    with pytest.raises(KeyError, match="Duplicate keys detected"):
        CR.UnionResolver(a, clash).cluster_spec()
    with pytest.raises(ValueError, match="At least one ClusterResolver"):
        CR.UnionResolver()
    with pytest.raises(ValueError, match="Unexpected kwargs"):
        CR.UnionResolver(a, foo=1)
    with pytest.raises(TypeError, match="must be a `tf.train.ClusterSpec`"):
        CR.SimpleClusterResolver({"worker": ["a"]})
    assert tf.contrib.cluster_resolver.UnionClusterResolver is CR.UnionResolver


def test_slurm_jobs_take_consecutive_ranks(slurm):
    slurm(PROCID="2", STEP_NUM_TASKS="4", STEP_NODELIST="n[01-02]", STEP_TASKS_PER_NODE="2(x2)")
    r = CR.SlurmClusterResolver(
        jobs={"ps": 1, "worker": 3}, port_base=2222, gpus_per_node=4, auto_set_gpu=False
    )
    assert (r.master(), r.task_type) == ("", None)  # known once cluster_spec() ran
    assert r.cluster_spec().as_dict() == {
        "ps": ["n01:2222"],
        "worker": ["n01:2223", "n02:2222", "n02:2223"],
    }
    assert r.get_task_info() == ("worker", 1)
    assert (r.master(), r.master("worker", 0, "http")) == ("grpc://n02:2222", "http://n01:2223")
    assert r.num_accelerators() == {"GPU": 2}


def test_slurm_default_job_hosts_sorted_and_gpus_exported(slurm, monkeypatch):
    slurm(PROCID="0", STEP_NUM_TASKS="3", STEP_NODELIST="t02,t01[0-1]", STEP_TASKS_PER_NODE="1,1,1")
    r = CR.SlurmClusterResolver(gpus_per_node=2, auto_set_gpu=False)
    assert r.cluster_spec().as_dict() == {"worker": ["t010:8888", "t011:8888", "t02:8888"]}
    assert (r.get_task_info(), r.num_accelerators()) == (("worker", 0), {"GPU": 2})
    slurm(PROCID="3", STEP_NUM_TASKS="4", STEP_NODELIST="a[1-2]", STEP_TASKS_PER_NODE="2(x2)")
    r = CR.SlurmClusterResolver(jobs={"worker": 4}, gpus_per_node=2, gpus_per_task=1)
    r.cluster_spec()
    assert (r.get_task_info(), r.master()) == (("worker", 3), "grpc://a2:8889")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_slurm_errors_and_overrides(slurm):
    slurm(PROCID="1", STEP_NUM_TASKS="4", STEP_NODELIST="a[1-2]", STEP_TASKS_PER_NODE="2(x2)")
    with pytest.raises(RuntimeError, match="Requested 3 tasks but only 4 were assigned"):
        CR.SlurmClusterResolver(jobs={"worker": 3}, gpus_per_node=2)
    with pytest.raises(RuntimeError, match="more GPUs per node than available"):
        CR.SlurmClusterResolver(gpus_per_node=2, gpus_per_task=2)
    r = CR.SlurmClusterResolver(jobs={"worker": 2}, gpus_per_node=2, tasks_per_node=1)
    assert r.cluster_spec().as_dict() == {"worker": ["a1:8888", "a2:8888"]}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # both GPUs of a2 for rank 1
    slurm(STEP_NUM_TASKS="3")
    with pytest.raises(RuntimeError, match="SLURM_PROCID not found in environment"):
        CR.SlurmClusterResolver()


def test_slurm_without_gpus_and_job_level_variables(slurm):
    """Better than TF 2 (which fails with 'range() arg 3 must not be zero'): CPU-only nodes
    lay out every task with no GPUs; outside `srun` the job-level variables are used."""
    slurm(PROCID="1", STEP_NUM_TASKS="3")
    r = CR.SlurmClusterResolver(
        gpus_per_node=0, tasks_per_node={"h1": 1, "h0": 2}, auto_set_gpu=False
    )
    assert r.cluster_spec().as_dict() == {"worker": ["h0:8888", "h0:8889", "h1:8888"]}
    assert (r.master(), r.num_accelerators()) == ("grpc://h0:8889", {"GPU": 0})
    slurm(PROCID="0", NTASKS="2", JOB_NODELIST="c[7-8]", TASKS_PER_NODE="1(x2)")
    r = CR.SlurmClusterResolver(gpus_per_node=0, auto_set_gpu=False)
    assert r.cluster_spec().as_dict() == {"worker": ["c7:8888", "c8:8888"]}


@pytest.mark.parametrize(
    "hostlist, hosts",
    [
        ("n[1-3]", ["n1", "n2", "n3"]),
        ("n[01-03],m", ["n01", "n02", "n03", "m"]),
        ("a,b[9-11]", ["a", "b9", "b10", "b11"]),
        ("x[1,3-4]y", ["x1y", "x3y", "x4y"]),  # TF: 'Invalid part'
        ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
    ],
)
def test_expand_hostlist(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize("hostlist", ["bad[1-2", "c[a-b]", "a,,b", "d]"])
def test_expand_hostlist_errors(hostlist):
    with pytest.raises(ValueError, match=re.escape(f'Invalid hostlist format "{hostlist}"')):
        expand_hostlist(hostlist)


def test_expand_tasks_per_node():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(ValueError, match='Invalid tasks-per-node list format "x"'):
        expand_tasks_per_node("x")


def test_gpus_of_the_node_come_from_cuda_visible_devices(monkeypatch):
    from flowgraph.distribute.cluster_resolver.slurm import get_num_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2,3")
    assert get_num_gpus() == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # TF counts 1 here
    assert get_num_gpus() == 0

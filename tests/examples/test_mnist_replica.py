"""examples/mnist_replica.py: its cluster from flags, TF_CONFIG or Slurm, its graph (variables on
the ps, compute on the worker, the SyncReplicasOptimizer's state where TF puts it), and training
on an in-process cluster of one ps and one worker task, asynchronously and synchronously."""

import json
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed.local import InProcessCluster
from flowgraph.examples import mnist_replica

PS = "/job:ps/task:0/device:CPU:0"


def _args(*flags):
    return mnist_replica.parse_args(["--job_name=worker", "--task_index=1", *flags])


def test_cluster_from_flags_tf_config_and_slurm(monkeypatch):
    cluster, job, task = mnist_replica.resolve_cluster(_args())
    assert cluster.as_dict() == {
        "ps": ["localhost:2222"],
        "worker": ["localhost:2223", "localhost:2224"],
    }
    assert (job, task) == ("worker", 1)
    with pytest.raises(ValueError, match="task_index"):
        mnist_replica.resolve_cluster(mnist_replica.parse_args(["--job_name=ps"]))
    for key in ("TF_CONFIG", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError, match="job_name"):
        mnist_replica.resolve_cluster(mnist_replica.parse_args([]))
    config = {"cluster": {"ps": ["ps-0:2222"], "worker": ["w-0:2222"]}}
    monkeypatch.setenv("TF_CONFIG", json.dumps({**config, "task": {"type": "ps", "index": 0}}))
    cluster, job, task = mnist_replica.resolve_cluster(mnist_replica.parse_args([]))
    assert (cluster.as_dict(), job, task) == (config["cluster"], "ps", 0)
    monkeypatch.delenv("TF_CONFIG")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the resolver sets it; restored after
    for key, value in {"PROCID": "2", "NTASKS": "3", "JOB_NODELIST": "n[1-3]"}.items():
        monkeypatch.setenv("SLURM_" + key, value)
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "1(x3)")
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS", raising=False)
    monkeypatch.delenv("SLURM_STEP_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_STEP_TASKS_PER_NODE", raising=False)
    cluster, job, task = mnist_replica.resolve_cluster(
        mnist_replica.parse_args(["--port_base=5000"])
    )
    assert cluster.as_dict() == {"ps": ["n1:5000"], "worker": ["n2:5000", "n3:5000"]}
    assert (job, task) == ("worker", 1)


def test_graph_puts_variables_on_the_ps_and_compute_on_the_worker():
    args = _args("--sync_replicas", "--replicas_to_aggregate=1")
    cluster, _, task = mnist_replica.resolve_cluster(args)
    with tf.Graph().as_default() as graph:
        model = mnist_replica.build_model(cluster, task, args, pixels=64)
        devices = {op.name: op.device for op in graph.get_operations()}
    for name in ("global_step", "hid_w", "hid_b", "sm_w", "sm_b", "hid_w/Adam", "beta1_power"):
        assert devices[name] == PS, name
    assert devices["sync_token_q"] == PS
    assert devices["mnist_sync_replicas/conditional_accumulator"] == PS
    assert devices["sync_rep_local_step"] == "/job:worker/task:1/device:CPU:0"
    assert model.cross_entropy.op.device == "/job:worker/task:1/device:CPU:0"
    assert not model.is_chief
    assert model.opt._total_num_replicas == 2 and model.opt._replicas_to_aggregate == 1


@pytest.mark.parametrize("sync", [False, True])
def test_trains_on_an_in_process_cluster(sync):
    flags = ["--task_index=0", "--train_steps=25", "--worker_hosts=localhost:1", "--batch_size=50"]
    flags.append("--stop_grace_secs=0")
    args = mnist_replica.parse_args(["--job_name=worker", *flags] + ["--sync_replicas"] * sync)
    cluster, _, task = mnist_replica.resolve_cluster(args)
    data, pixels = mnist_replica.load_data("")
    assert pixels == 64  # no MNIST files: the bundled digits
    in_process = InProcessCluster({"ps": 1, "worker": 1})
    try:
        with tf.Graph().as_default():
            model = mnist_replica.build_model(cluster, task, args, pixels)
            local_steps, step, val_xent = mnist_replica.train(
                model, in_process.target, args, data, log=lambda *_: None
            )
    finally:
        in_process.close()
    assert step == 25
    assert local_steps == 25 + sync  # sync: the first batch after the initial token is stale
    # An untrained model's cross entropy on the 180 validation digits is about 180 * ln(10).
    assert np.isfinite(val_xent) and val_xent < 0.5 * 180 * np.log(10)


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _pod_tf_config(container, **env):
    """Runs the pod command's TF_CONFIG export in sh with the pod's environment."""
    script = container["args"][0]
    export, _, program = script.partition("&& exec ")
    env = {e["name"]: e["value"] for e in container["env"]} | env | {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        ["/bin/sh", "-c", export + ' && printf %s "$TF_CONFIG"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    return json.loads(out.stdout), shlex.split(program)


def test_kubernetes_pods_get_the_tf_config_of_their_task(monkeypatch):
    yaml = pytest.importorskip("yaml")
    docs = {
        d["kind"]: d
        for d in yaml.safe_load_all((DEPLOY / "kubernetes/mnist-replica.yaml").read_text())
    }
    ps = docs["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]
    worker = docs["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert docs["Job"]["spec"]["completions"] == 2
    tasks = [(_pod_tf_config(ps, HOSTNAME="mnist-ps-0"), ("ps", 0))]
    tasks += [(_pod_tf_config(worker, JOB_COMPLETION_INDEX=str(i)), ("worker", i)) for i in (0, 1)]
    for (config, program), want in tasks:
        assert program[:3] == ["python", "-m", "flowgraph.examples.mnist_replica"]
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        cluster, job, task = mnist_replica.resolve_cluster(mnist_replica.parse_args(program[3:]))
        assert (job, task) == want
        assert cluster.task_address("ps", 0) == "mnist-ps-0.mnist-ps:2222"
        assert cluster.task_address("worker", 1) == "mnist-worker-1.mnist-worker:2222"


def test_slurm_script_lays_out_one_ps_and_two_workers(monkeypatch):
    script = (DEPLOY / "slurm/mnist_replica.sbatch").read_text()
    assert "#SBATCH --nodes=3" in script
    command = shlex.split(script[script.index("srun") :].replace("\\\n", " "))
    flags = command[command.index("flowgraph.examples.mnist_replica") + 1 :]
    args = mnist_replica.parse_args(flags)
    assert args.sync_replicas and args.num_ps == 1
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    env = {"STEP_NUM_TASKS": "3", "STEP_NODELIST": "node[1-3]", "STEP_TASKS_PER_NODE": "1(x3)"}
    for key, value in env.items():
        monkeypatch.setenv("SLURM_" + key, value)
    for rank, want in enumerate([("ps", 0), ("worker", 0), ("worker", 1)]):
        monkeypatch.setenv("SLURM_PROCID", str(rank))
        cluster, job, task = mnist_replica.resolve_cluster(args)
        assert (job, task) == want
        assert cluster.as_dict() == {"ps": ["node1:2222"], "worker": ["node2:2222", "node3:2222"]}

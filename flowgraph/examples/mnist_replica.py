"""Distributed MNIST training with model replicas: TF1's `mnist_replica.py` (the
tools/dist_test program) on flowgraph (whitepaper §7, Figure 7: data parallelism).

A softmax model with one hidden layer keeps its variables on the parameter server (ps) task;
each worker task builds the same graph (between-graph replication), computes gradients on its
own batches and updates the shared variables, asynchronously or, with --sync_replicas, through
a SyncReplicasOptimizer that averages `replicas_to_aggregate` gradients per step (fewer than
the workers makes the rest backup workers). Worker 0 is the chief: it initializes the
variables and runs the synchronization queue runner; the others wait for it.

One process per task, as in TensorFlow:
    python -m flowgraph.examples.mnist_replica --job_name=ps --task_index=0 &
    python -m flowgraph.examples.mnist_replica --job_name=worker --task_index=0 --sync_replicas &
    python -m flowgraph.examples.mnist_replica --job_name=worker --task_index=1 --sync_replicas
(default hosts localhost:2222 for the ps and localhost:2223,2224 for the workers). Without
--job_name the task comes from the environment a scheduler set: TF_CONFIG (Kubernetes, see
deploy/kubernetes) or Slurm's variables (deploy/slurm). MNIST is read from --data_dir when its
four IDX files are there; otherwise the bundled 8x8 digits are used, so the example runs
anywhere without a download.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time

import flowgraph as tf
from flowgraph.examples import input_data

Model = collections.namedtuple(
    "Model",
    ["x", "labels", "cross_entropy", "train_step", "global_step", "opt", "is_chief", "task_index"],
)


def parse_args(argv):
    """TF1's flags (same names and meanings); --num_gpus defaults to 0 here."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data_dir", default="/tmp/mnist-data", help="MNIST IDX files, if any")
    p.add_argument("--task_index", type=int, default=None, help="index of this task in its job")
    p.add_argument("--job_name", default=None, help="ps or worker (default: from TF_CONFIG/Slurm)")
    p.add_argument("--num_gpus", type=int, default=0, help="GPUs per machine (0: CPU)")
    p.add_argument("--replicas_to_aggregate", type=int, default=None)
    p.add_argument("--hidden_units", type=int, default=100)
    p.add_argument("--train_steps", type=int, default=200, help="global steps to train")
    p.add_argument("--batch_size", type=int, default=100)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--sync_replicas", action="store_true", help="SyncReplicasOptimizer")
    p.add_argument("--existing_servers", action="store_true", help="connect to running servers")
    p.add_argument("--ps_hosts", default="localhost:2222")
    p.add_argument("--worker_hosts", default="localhost:2223,localhost:2224")
    p.add_argument("--num_ps", type=int, default=1, help="ps tasks of a Slurm job")
    p.add_argument("--port_base", type=int, default=2222, help="first port on a Slurm node")
    # At the end the chief's sync queue runner still waits for gradients (as in TensorFlow);
    # closing the session waits this long for it before cancelling it.
    p.add_argument("--stop_grace_secs", type=float, default=2.0)
    return p.parse_args(argv)


def resolve_cluster(args):
    """(ClusterSpec, job name, task index) from the flags, else TF_CONFIG, else Slurm."""
    if args.job_name:
        if args.task_index is None:
            raise ValueError("Must specify an explicit `task_index`")
        spec = {"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")}
        return tf.train.ClusterSpec(spec), args.job_name, args.task_index
    resolvers = tf.distribute.cluster_resolver
    if "TF_CONFIG" in os.environ:
        resolver = resolvers.TFConfigClusterResolver()
    elif "SLURM_PROCID" in os.environ:
        ntasks = int(os.environ.get("SLURM_STEP_NUM_TASKS", os.environ.get("SLURM_NTASKS", "0")))
        jobs = {"ps": args.num_ps, "worker": ntasks - args.num_ps}
        resolver = resolvers.SlurmClusterResolver(jobs, port_base=args.port_base)
    else:
        raise ValueError("Must specify an explicit `job_name` (or set TF_CONFIG / run in Slurm)")
    cluster = resolver.cluster_spec()  # Slurm's resolver learns this task's job here
    return cluster, resolver.task_type, resolver.task_id


def load_data(data_dir):
    """MNIST if its files are in `data_dir`, else the bundled digits; (datasets, pixels)."""
    if data_dir and os.path.exists(os.path.join(data_dir, input_data.TRAIN_IMAGES)):
        return input_data.read_data_sets(data_dir, one_hot=True), 28 * 28
    return input_data.load_digits(one_hot=True), 8 * 8


def build_model(cluster, task_index, args, pixels):
    """The worker's graph: variables on the ps tasks, the rest on this worker."""
    num_workers = cluster.num_tasks("worker")
    if args.num_gpus > 0:  # tasks on one machine take its GPUs in turn
        worker_device = f"/job:worker/task:{task_index}/gpu:{task_index % args.num_gpus}"
    else:
        worker_device = f"/job:worker/task:{task_index}/cpu:0"
    setter = tf.train.replica_device_setter(
        worker_device=worker_device, ps_device="/job:ps/cpu:0", cluster=cluster
    )
    with tf.device(setter):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        hid_w = tf.Variable(
            tf.truncated_normal([pixels, args.hidden_units], stddev=1.0 / math.sqrt(pixels)),
            name="hid_w",
        )
        hid_b = tf.Variable(tf.zeros([args.hidden_units]), name="hid_b")
        sm_w = tf.Variable(
            tf.truncated_normal([args.hidden_units, 10], stddev=1.0 / math.sqrt(args.hidden_units)),
            name="sm_w",
        )
        sm_b = tf.Variable(tf.zeros([10]), name="sm_b")
        x = tf.placeholder(tf.float32, [None, pixels])
        labels = tf.placeholder(tf.float32, [None, 10])
        hid = tf.nn.relu(tf.nn.xw_plus_b(x, hid_w, hid_b))
        y = tf.nn.softmax(tf.nn.xw_plus_b(hid, sm_w, sm_b))
        cross_entropy = -tf.reduce_sum(labels * tf.log(tf.clip_by_value(y, 1e-10, 1.0)))
        opt = tf.train.AdamOptimizer(args.learning_rate)
        if args.sync_replicas:
            opt = tf.train.SyncReplicasOptimizer(
                opt,
                replicas_to_aggregate=args.replicas_to_aggregate or num_workers,
                total_num_replicas=num_workers,
                name="mnist_sync_replicas",
            )
        train_step = opt.minimize(cross_entropy, global_step=global_step)
    return Model(
        x, labels, cross_entropy, train_step, global_step, opt, task_index == 0, task_index
    )


def train(model, target, args, data, log=print):
    """Trains until the global step reaches --train_steps; returns (this worker's steps, the
    last global step it saw, the validation cross entropy)."""
    validation = {model.x: data.validation.images, model.labels: data.validation.labels}
    final = tf.train.FinalOpsHook(model.cross_entropy, validation)  # runs when training ends
    hooks = [tf.train.StopAtStepHook(last_step=args.train_steps), final]
    if args.sync_replicas:
        hooks.append(model.opt.make_session_run_hook(model.is_chief))
    # As in TensorFlow's program: a worker's sessions use the ps tasks and its own task only,
    # so that it neither waits for the other workers to start nor fails once they have ended.
    config = tf.ConfigProto(
        allow_soft_placement=True,
        log_device_placement=False,
        device_filters=["/job:ps", f"/job:worker/task:{model.task_index}"],
    )
    log(f"Worker {'chief' if model.is_chief else 'replica'}: creating the session at {target!r}")
    local_step, step = 0, 0
    with tf.train.MonitoredTrainingSession(
        master=target,
        is_chief=model.is_chief,
        hooks=hooks,
        config=config,
        save_summaries_steps=None,
        save_checkpoint_secs=None,
        stop_grace_period_secs=args.stop_grace_secs,
    ) as sess:
        time_begin = time.time()
        while not sess.should_stop():
            batch_xs, batch_ys = data.train.next_batch(args.batch_size)
            feed = {model.x: batch_xs, model.labels: batch_ys}
            _, step = sess.run([model.train_step, model.global_step], feed_dict=feed)
            local_step += 1
            log(f"{time.time():f}: training step {local_step} done (global step: {step})")
            if step >= args.train_steps:
                break
        log(f"Training elapsed time: {time.time() - time_begin:f} s")
    val_xent = final.final_ops_values
    log(f"After {step} training step(s), validation cross entropy = {val_xent}")
    return local_step, step, val_xent


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    cluster, job_name, task_index = resolve_cluster(args)
    print(f"job name = {job_name}\ntask index = {task_index}")
    if args.existing_servers:
        target = "grpc://" + cluster.task_address(job_name, task_index)
    else:
        server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
        if job_name == "ps":
            server.join()
            return None
        target = server.target
    data, pixels = load_data(args.data_dir)
    model = build_model(cluster, task_index, args, pixels)
    return train(model, target, args, data)


if __name__ == "__main__":
    main()

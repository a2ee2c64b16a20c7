"""SlurmClusterResolver: the cluster of a Slurm job step, from the variables `srun` sets in
every task (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST,
SLURM_STEP_TASKS_PER_NODE; the job-level SLURM_NTASKS, SLURM_JOB_NODELIST and
SLURM_TASKS_PER_NODE when no step variables exist, as in the batch script itself).

The tasks are laid out as TensorFlow's resolver lays them out: hosts in sorted order, on each
host ports port_base, port_base + 1, ... for its tasks, and the jobs (sorted by name) take
consecutive ranks: jobs={"ps": 1, "worker": 2} makes rank 0 the ps and ranks 1-2 the workers.
Each task gets its own GPUs (`gpus_per_task` of them), exported as CUDA_VISIBLE_DEVICES when
`auto_set_gpu`. Unlike TF 2's, a node without GPUs is fine (0 GPUs per task), and hostlists
may hold several bracket groups ("rack[1-2]-n[01-02]").
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess

from flowgraph.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from flowgraph.train.cluster_spec import ClusterSpec

__all__ = ["SlurmClusterResolver", "expand_hostlist", "expand_tasks_per_node"]


def _split_top_level(text: str):
    """Splits at commas outside brackets: 'a[1,2],b' -> ['a[1,2]', 'b']."""
    parts, depth, current = [], 0, ""
    for c in text:
        if c == "[":
            if depth:
                raise ValueError("nested '['")
            depth = 1
        elif c == "]":
            if not depth:
                raise ValueError("']' without '['")
            depth = 0
        elif c == "," and not depth:
            if not current:
                raise ValueError("empty host name")
            parts.append(current)
            current = ""
            continue
        current += c
    if depth:
        raise ValueError("unclosed '['")
    if current:
        parts.append(current)
    return parts


def _expand_range(range_exp: str) -> list:
    """'01-03,7' -> ['01', '02', '03', '7']: zero padding follows the lower bound."""
    out = []
    for part in range_exp.split(","):
        bounds = part.split("-")
        if len(bounds) == 1:
            bounds = bounds * 2
        if len(bounds) != 2 or not all(b.isdigit() for b in bounds):
            raise ValueError(f"bad range '{part}'")
        width = len(bounds[0])
        out.extend(str(i).zfill(width) for i in range(int(bounds[0]), int(bounds[1]) + 1))
    return out


def expand_hostlist(hostlist: str) -> list:
    """Slurm's compressed host list in full: 'n[01-02],m5' -> ['n01', 'n02', 'm5']."""
    hosts = []
    try:
        for part in _split_top_level(hostlist):
            pieces = re.split(r"\[([^\]]*)\]", part)  # literal, range, literal, range, ...
            choices = [[p] if i % 2 == 0 else _expand_range(p) for i, p in enumerate(pieces)]
            hosts.extend("".join(combo) for combo in itertools.product(*choices))
    except ValueError as e:
        raise ValueError(f'Invalid hostlist format "{hostlist}": {e}') from None
    return hosts


def expand_tasks_per_node(tasks_per_node: str) -> list:
    """Slurm's tasks-per-node list in full: '2(x3),1' -> [2, 2, 2, 1]."""
    result = []
    for part in tasks_per_node.split(","):
        m = re.match(r"(\d+)(\(x(\d+)\))?$", part)
        if m is None:
            raise ValueError(f'Invalid tasks-per-node list format "{tasks_per_node}"')
        result.extend([int(m.group(1))] * int(m.group(3) or 1))
    return result


def _get_slurm_var(*names: str) -> str:
    """The first of SLURM_<name> that is set."""
    for name in names:
        value = os.environ.get("SLURM_" + name)
        if value is not None:
            return value
    raise RuntimeError(
        f"SLURM_{names[0]} not found in environment. Not running inside a SLURM step?"
    )


def get_num_gpus() -> int:
    """GPUs of this node: CUDA_VISIBLE_DEVICES if set, else nvidia-smi's list, else 0."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        output = subprocess.check_output(["nvidia-smi", "--list-gpus"], encoding="utf-8")
    except subprocess.CalledProcessError as e:
        raise RuntimeError(
            f"Could not get number of GPUs from nvidia-smi. Maybe it is missing?\nOutput: {e.output}"
        ) from None
    return sum(line.startswith("GPU ") for line in output.strip().split("\n"))


class SlurmClusterResolver(ClusterResolver):
    """The cluster of the running Slurm step (see the module docstring).

    Args:
        jobs: {job name: number of tasks}; default {'worker': all tasks of the step}.
        port_base: the first port on each node.
        gpus_per_node: default: detected on this node (0 without GPUs).
        gpus_per_task: default: gpus_per_node // the most tasks on one node.
        tasks_per_node: an int for every node, a {host: count} dict, or None: Slurm's.
        auto_set_gpu: export this task's GPUs as CUDA_VISIBLE_DEVICES in cluster_spec().
        rpc_layer: the scheme of master() URLs.

    Example (srun --ntasks=3 python train.py):
        resolver = SlurmClusterResolver({"ps": 1, "worker": 2}, port_base=2222)
        cluster = resolver.cluster_spec()
        server = tf.train.Server(cluster, resolver.task_type, resolver.task_id)
    """

    def __init__(
        self,
        jobs=None,
        port_base=8888,
        gpus_per_node=None,
        gpus_per_task=None,
        tasks_per_node=None,
        auto_set_gpu=True,
        rpc_layer="grpc",
    ):
        self._rank = int(_get_slurm_var("PROCID"))
        if jobs is None:
            jobs = {"worker": int(_get_slurm_var("STEP_NUM_TASKS", "NTASKS"))}
        self._jobs = dict(jobs)
        self._port_base = port_base
        if tasks_per_node is None:
            hosts = self._resolve_hostlist()
            counts = expand_tasks_per_node(_get_slurm_var("STEP_TASKS_PER_NODE", "TASKS_PER_NODE"))
            self._task_configuration = dict(zip(hosts, counts))
        elif isinstance(tasks_per_node, dict):
            self._task_configuration = dict(tasks_per_node)
        else:
            self._task_configuration = {h: int(tasks_per_node) for h in self._resolve_hostlist()}
        max_tasks_per_node = max(self._task_configuration.values())
        num_tasks = sum(self._task_configuration.values())
        if gpus_per_node is None:
            gpus_per_node = get_num_gpus()
        if gpus_per_task is None:
            gpus_per_task = gpus_per_node // max_tasks_per_node
        self._gpus_per_node = gpus_per_node
        self._gpus_per_task = gpus_per_task
        self._auto_set_gpu = auto_set_gpu
        self.task_type = None
        self.task_id = None
        self.rpc_layer = rpc_layer
        self._gpu_allocation: list = []
        self._cluster_allocation: dict = {}
        if max_tasks_per_node * gpus_per_task > gpus_per_node:
            raise RuntimeError("Requested more GPUs per node than available.")
        if sum(self._jobs.values()) != num_tasks:
            raise RuntimeError(
                f"Requested {sum(self._jobs.values())} tasks but only {num_tasks} were assigned."
            )

    @staticmethod
    def _resolve_hostlist() -> list:
        return expand_hostlist(_get_slurm_var("STEP_NODELIST", "JOB_NODELIST", "NODELIST"))

    def cluster_spec(self) -> ClusterSpec:
        """Lays out the tasks (module docstring); sets task_type/task_id of this rank."""
        task_list, self._gpu_allocation = [], []
        for host, num_tasks in sorted(self._task_configuration.items()):
            for offset in range(num_tasks):
                task_list.append(f"{host}:{self._port_base + offset}")
                first = offset * self._gpus_per_task
                gpus = range(first, first + self._gpus_per_task)
                self._gpu_allocation.append(",".join(str(g) for g in gpus))
        self._cluster_allocation = {}
        start = 0
        for task_type, num_tasks in sorted(self._jobs.items()):
            self._cluster_allocation[task_type] = task_list[start : start + num_tasks]
            if start <= self._rank < start + num_tasks:
                self.task_type = task_type
                self.task_id = self._rank - start
            start += num_tasks
        if self._auto_set_gpu:
            os.environ["CUDA_VISIBLE_DEVICES"] = self._gpu_allocation[self._rank]
        return ClusterSpec(self._cluster_allocation)

    def get_task_info(self):
        """(task_type, task_id) of this rank, known once cluster_spec() ran."""
        return self.task_type, self.task_id

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The address of this task (or the given one) as a URL; '' before cluster_spec()."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, rpc_layer or self.rpc_layer)

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        del task_type, task_id, config_proto
        return {"GPU": self._gpus_per_task}

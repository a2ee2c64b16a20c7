"""tf.train.ClusterSpec: the jobs of a cluster and the network address of each task
(whitepaper §3.3), convertible to and from the ClusterDef proto that servers exchange.

A job's tasks are a list (task i at index i) or a dict {task index: address}, so a job may
name only some of its tasks; `as_dict` gives back a list wherever the indices are dense.

Example:
    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:2222"],
                                    "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})
    cluster.num_tasks("worker")          # 2
    cluster.task_address("worker", 1)    # "127.0.0.1:2224"
"""

from __future__ import annotations

from flowgraph.core.protos import ClusterDef


class ClusterSpec:
    """Jobs -> {task index: "host:port"}; built from a dict, a ClusterDef or a ClusterSpec."""

    def __init__(self, cluster):
        if isinstance(cluster, dict):
            self._jobs = {name: _tasks_of(name, tasks) for name, tasks in cluster.items()}
            self._cluster_def = _cluster_def(self._jobs)
            return
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_cluster_def()
        if not isinstance(cluster, ClusterDef):
            raise TypeError(
                "`cluster` must be a dictionary mapping one or more job names to lists of "
                "network addresses, or a `ClusterDef` protocol buffer"
            )
        self._cluster_def = ClusterDef()
        self._cluster_def.MergeFrom(cluster)
        self._jobs = {job.name: dict(job.tasks) for job in self._cluster_def.job}

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other) -> bool:
        other = other._jobs if isinstance(other, ClusterSpec) else other
        return self._jobs == other

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = None

    def __str__(self) -> str:
        jobs = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{k!r}: {jobs[k]!r}" for k in sorted(jobs)) + "})"

    __repr__ = __str__

    def as_dict(self) -> dict:
        """{job: [addresses]} for jobs whose task indices are 0..n-1, {job: {index: address}}
        for the others."""
        result = {}
        for job in self.jobs:
            indices = self.task_indices(job)
            if indices and max(indices) + 1 == len(indices):
                result[job] = self.job_tasks(job)
            else:
                result[job] = {i: self.task_address(job, i) for i in indices}
        return result

    def as_cluster_def(self) -> ClusterDef:
        return self._cluster_def

    @property
    def jobs(self) -> list:
        return list(self._jobs)

    def _job(self, job_name) -> dict:
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError(f"No such job in cluster: {job_name!r}") from None

    def num_tasks(self, job_name) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name) -> list:
        return sorted(self._job(job_name))

    def task_address(self, job_name, task_index) -> str:
        job = self._job(job_name)
        if task_index not in job:
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r}")
        return job[task_index]

    def job_tasks(self, job_name) -> list:
        """The addresses of a job by task index, None where the job names no task."""
        job = self._job(job_name)
        tasks = [None] * (max(job) + 1 if job else 0)
        for i, address in job.items():
            tasks[i] = address
        return tasks


def _tasks_of(job_name, tasks) -> dict:
    if isinstance(tasks, (list, tuple)):
        return dict(enumerate(tasks))
    if isinstance(tasks, dict):  # {"1": ...} from JSON (TF_CONFIG) counts as index 1, as in TF
        return {int(i): address for i, address in tasks.items()}
    raise TypeError(
        f"The tasks for job {job_name!r} must be a list or a dictionary from integers to strings."
    )


def _text(value, what):
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise TypeError(f"{what} {value!r} must be bytes or unicode")
    return value


def _cluster_def(jobs: dict) -> ClusterDef:
    """The ClusterDef of {job: {index: address}}, jobs and tasks sorted (deterministic bytes)."""
    cluster_def = ClusterDef()
    for name, tasks in sorted(jobs.items()):
        job = cluster_def.job.add(name=_text(name, "Job name"))
        for i, address in sorted(tasks.items()):
            job.tasks[i] = _text(address, "Task address")
    return cluster_def

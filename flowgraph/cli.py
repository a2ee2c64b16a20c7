"""The `flowgraph` command: `flowgraph run SCRIPT.py [ARGS...]` runs an unmodified TF1 script
with `import tensorflow` (and `tensorflow.compat.v1`, and the paths in
`flowgraph.compat.TENSORFLOW_MODULES`) resolving to flowgraph (DESIGN.md, decision 1).

The script runs as `__main__` with `sys.argv == [SCRIPT, *ARGS]` and its directory first on
`sys.path`, exactly as `python SCRIPT.py ARGS...` would run it. `flowgraph run -m MODULE
[ARGS...]` runs a module the way `python -m MODULE` does (the current directory first on
`sys.path`): `flowgraph run -m pytest tests/` runs a user's TF1 test suite unchanged.

`flowgraph describe OP...` prints where each op's definition, kernels and gradient are
registered (core/registry.py).

`flowgraph server --cluster ps=127.0.0.1:2222,worker=127.0.0.1:2223,127.0.0.1:2224 --job worker
--task 0` runs one task of a cluster (tf.train.Server) until it is killed: in `--cluster`, a
`job=` entry starts a job and a bare address adds the next task to the job before it.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

_DESCRIPTION = "flowgraph: the TensorFlow whitepaper's system with the TF1 graph-mode API."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flowgraph", description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a TF1 script with `import tensorflow` resolving to flowgraph",
        description="Runs SCRIPT as __main__ with sys.argv = [SCRIPT, *ARGS] (or, given as "
        "`-m MODULE`, a module as `python -m MODULE` does); `tensorflow` and "
        "`tensorflow.compat.v1` resolve to flowgraph.",
    )
    run.add_argument("script", metavar="SCRIPT", help="path of the Python script to run")
    run.add_argument(
        "args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script"
    )
    describe = commands.add_parser(
        "describe",
        help="where an op's definition, kernels and gradient are registered",
        description="Prints the file:line where OP's OpDef, each of its kernels (device and "
        "dtypes) and its gradient are registered (flowgraph/core/registry.py).",
    )
    describe.add_argument("op", metavar="OP", nargs="+", help="op type, e.g. MatMul")
    server = commands.add_parser(
        "server",
        help="run one task of a cluster (tf.train.Server) until killed",
        description="Serves the master and worker of task JOB:TASK of CLUSTER on the address "
        "the cluster names for it.",
    )
    server.add_argument(
        "--cluster",
        required=True,
        type=parse_cluster,
        help="jobs and task addresses: ps=127.0.0.1:2222,worker=127.0.0.1:2223,127.0.0.1:2224",
    )
    server.add_argument("--job", required=True, help="this task's job name")
    server.add_argument("--task", type=int, default=0, help="this task's index in its job")
    return parser


def parse_cluster(text: str) -> dict[str, list[str]]:
    """{"ps": ["a:1"], "worker": ["b:2", "c:3"]} from "ps=a:1,worker=b:2,c:3"."""
    jobs: dict[str, list[str]] = {}
    job = None
    for entry in text.split(","):
        name, sep, address = entry.rpartition("=")
        if sep:
            job = name.strip()
            if not job or job in jobs:
                raise argparse.ArgumentTypeError(f"bad or repeated job name in {entry!r}")
            jobs[job] = []
        if job is None or not address.strip():
            raise argparse.ArgumentTypeError(f"{entry!r}: expected job=host:port or host:port")
        jobs[job].append(address.strip())
    return jobs


def run_server(cluster: dict[str, list[str]], job: str, task: int) -> None:
    """Serves task `job`:`task` of `cluster` until the process is killed."""
    from flowgraph.train.server import Server

    Server(cluster, job_name=job, task_index=task).join()


def describe_ops(op_types: list[str]) -> int:
    """Prints where each op of `op_types` is registered; 1 if one of them is unknown."""
    import flowgraph  # noqa: F401  (registers every op, kernel and gradient)
    from flowgraph.core import errors, registry

    status = 0
    for op_type in op_types:
        try:
            print(registry.format_description(op_type))
        except errors.NotFoundError as e:
            print(f"flowgraph describe: {e.message}", file=sys.stderr)
            status = 1
    return status


def run_script(script: str, args: list[str]) -> None:
    """Runs `script` as __main__ with the tensorflow aliases installed."""
    from flowgraph import compat

    if not os.path.isfile(script):
        raise FileNotFoundError(f"flowgraph run: no such script: {script}")
    compat.install_tensorflow_aliases()
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def run_module(module: str, args: list[str]) -> None:
    """Runs `module` as __main__ (like `python -m module ARGS`) with the tensorflow aliases."""
    from flowgraph import compat

    compat.install_tensorflow_aliases()
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [module, *args]  # runpy sets argv[0] to the module's file
    sys.path.insert(0, os.getcwd())
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `flowgraph` console script; returns the exit status."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    if argv[0] == "run" and len(argv) > 1 and argv[1] == "-m":
        if len(argv) < 3:
            parser.exit(2, "flowgraph run: -m needs a module name\n")
        run_module(argv[2], argv[3:])
        return 0
    opts = parser.parse_args(argv)  # exits with status 2 and a usage line on a bad command
    if opts.command == "run":
        if not os.path.isfile(opts.script):
            parser.exit(2, f"flowgraph run: no such script: {opts.script}\n")
        run_script(opts.script, opts.args)
        return 0
    if opts.command == "describe":
        return describe_ops(opts.op)
    if opts.command == "server":
        run_server(opts.cluster, opts.job, opts.task)
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

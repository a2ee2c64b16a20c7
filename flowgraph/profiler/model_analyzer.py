"""The model analyzer behind `tf.profiler.profile` and `tf.profiler.Profiler` (whitepaper §9.2):
per graph node its parameters, float operations (flops.py), and, from the RunMetadata of traced
steps, its execution time and memory; reported by name scope, by data flow or by op type.

Every op of the graph is a profile node, and so is every node a traced step ran that the graph
lacks (a feed's _recv, a fetch's _send), as in TensorFlow. Statistics of a node, TensorFlow's:
    params         elements of its "shape" attribute (variables; placeholders too), 1 if scalar
    float_ops      the registered "flops" statistic from shapes (graph shapes, completed by the
                   traced steps' output shapes), times its runs in the step if it ran
    micros         kernel time of its runs (op_end_rel_micros, at least 1us each); CPU time
    bytes          allocator memory (total, peak, live at its end) and output bytes
    occurrence     runs per step; types are its op type, op_log types, "_trainable_variables"
                   and, once it ran, its lowercase device
With several steps added, `step=-1` reports each node's average over the steps it ran in.
report.py builds the scope, graph and op views as TensorFlow's tfprof does.
"""

from __future__ import annotations

import copy
import linecache
import logging
import sys

from flowgraph.core.protos.tfprof_log_pb2 import OpLogProto
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.operation import user_stack
from flowgraph.profiler import advisor, code_view, flops, op_view, report
from flowgraph.profiler.advisor import ALL_ADVICE
from flowgraph.profiler.option_builder import (
    ALL_DEFAULTS,
    ORDERABLE,
    SELECTABLE,
    ProfileOptionBuilder,
)

logger = logging.getLogger(__name__)

__all__ = ["ALL_ADVICE", "Profiler", "advise", "profile", "write_op_log"]

TRAINABLE = "_trainable_variables"
STEP_STATS = ("run_count", "cpu_exec_micros", "requested_bytes", "peak_bytes", "residual_bytes")
STEP_STATS += ("output_bytes",)
_COMMANDS = ("scope", "graph", "op", "code")
# Nodes of a RunMetadata that TensorFlow's profiler leaves out (they run on several devices).
_SKIPPED_RUNTIME_NODES = ("RecvTensor", "_SOURCE")


class ProfNode:
    """One node: an op of the graph, or a node only the runtime ran (a feed's _recv, a fetch's
    _send; its type is its name, as in TensorFlow), with what the graph says (types, the
    "shape" attribute that counts parameters, float ops) and what each traced step measured."""

    def __init__(self, name, op=None, node_def=None):
        self.name = name
        self.op = op
        self.op_type = op.type if op is not None else name
        self.types = {self.op_type}
        self.device = ""  # the lowercase device it ran on, once a step ran it
        self.inputs = [] if op is None else [t.op.name for t in op.inputs]
        self.input_slots = [] if op is None else [(t.op, t.value_index) for t in op.inputs]
        if op is not None:
            self.inputs += [c.name for c in op.control_inputs]
            self.input_slots += [(c, 0) for c in op.control_inputs]
        self.shape = _shape_attr(node_def)
        self.float_ops = 0  # per run
        self.steps: dict[int, dict] = {}  # step -> {stat: value}
        self.times: dict[int, tuple] = {}  # step -> (first start, last end) in micros
        self.shapes = None  # _MeasuredShapes of the profiler

    @property
    def params(self) -> int:
        """TensorFlow's count: the elements of the "shape" attribute when it is known (a
        variable's shape; a placeholder's too, which TensorFlow also counts)."""
        if not self.shape or any(d < 0 for d in self.shape):
            return 0
        n = 1
        for d in self.shape:
            n *= d
        return n

    def stats(self, step: int) -> dict:
        """GraphNodeProto's own values at `step`; step -1 averages the steps it ran in."""
        out = dict.fromkeys(STEP_STATS, 0)
        if step in self.steps:
            out.update(self.steps[step])
        elif step == -1 and self.steps:
            n = len(self.steps)
            out = {k: sum(s[k] for s in self.steps.values()) // n for k in STEP_STATS}
        runs = out["run_count"]
        return {
            **out,
            "exec_micros": out["cpu_exec_micros"],  # no accelerators: all time is CPU time
            "accelerator_exec_micros": 0,
            "parameters": self.params,
            "float_ops": self.float_ops * runs if self.steps else self.float_ops,
        }

    def input_shapes(self) -> list:
        """Each input's shape (a control input's: its op's first output), as TensorShapes."""
        out = []
        for op, slot in self.input_slots:
            outputs = op.outputs
            out.append(self.shapes.shape(outputs[slot]) if slot < len(outputs) else None)
        return [s if s is not None else TensorShape(None) for s in out]

    def input_dims(self) -> list:
        """Input shapes as TensorFlow prints them: dims (-1 unknown), [1] for a scalar, []
        for an unknown rank."""
        return [_dims(s) for s in self.input_shapes()]

    def output_shapes(self) -> list:
        return [] if self.op is None else [self.shapes.shape(t) for t in self.op.outputs]


def _dims(shape) -> list:
    if shape.dims is None:
        return []
    dims = [-1 if d is None else d for d in shape.as_list()]
    return dims or [1]


def _shape_attr(node_def) -> list:
    """The "shape" attribute as TensorFlow's profiler reads it ([1] for a scalar)."""
    if node_def is None or "shape" not in node_def.attr:
        return []
    attr = node_def.attr["shape"]
    if not attr.HasField("shape") or attr.shape.unknown_rank:
        return []
    return [d.size for d in attr.shape.dim] or [1]


class _MeasuredShapes:
    """The graph as the flops statistics see it: `get_tensor_by_name(n).shape` is the graph's
    static shape, completed by the shape a traced step measured where the graph leaves it
    unknown. (TensorFlow writes the measured shapes into the graph; this leaves it alone.)"""

    def __init__(self, graph):
        self._graph = graph
        self.measured: dict[str, TensorShape] = {}

    def get_tensor_by_name(self, name):
        tensor = self._graph.get_tensor_by_name(name)
        shape = tensor.shape
        measured = self.measured.get(tensor.name)
        known = shape.is_fully_defined()
        if measured is not None and not known and shape.is_compatible_with(measured):
            shape = shape.merge_with(measured)
        return _Shaped(shape)

    def shape(self, tensor):
        return self.get_tensor_by_name(tensor.name).shape

    def record(self, name: str, slot: int, desc) -> None:
        if desc.HasField("shape"):
            self.measured[f"{name}:{slot}"] = TensorShape([d.size for d in desc.shape.dim])


class _Shaped:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


class Profiler:
    """Profiles a graph over one or more traced steps (TF1's tf.profiler.Profiler).

    Example:
        profiler = tf.profiler.Profiler(sess.graph)
        profiler.add_step(step, run_metadata)
        profiler.profile_operations(ProfileOptionBuilder.time_and_memory())
    """

    def __init__(self, graph=None, op_log=None):
        self._graph = graph if graph is not None else default_graph.get()
        self._shapes = _MeasuredShapes(self._graph)
        self._node_defs = {n.name: n for n in self._graph.as_graph_def().node}
        self._nodes = {
            op.name: ProfNode(op.name, op, self._node_defs.get(op.name))
            for op in self._graph.get_operations()
        }
        for node in self._nodes.values():
            node.shapes = self._shapes
        self._step_stats = {}  # step -> StepStats, for timeline output
        for v in self._graph.get_collection(GraphKeys.TRAINABLE_VARIABLES):
            node = self._nodes.get(getattr(getattr(v, "op", None), "name", None))
            if node is not None:
                node.types.add(TRAINABLE)
        self._op_log = op_log
        self._count_flops()

    def _count_flops(self):
        for node in self._nodes.values():
            if node.op is None:
                continue
            try:
                stats = flops.get_stats_for_node_def(
                    self._shapes, self._node_defs[node.name], "flops"
                )
            except (ValueError, KeyError, IndexError, TypeError) as e:
                logger.debug("no flops for %s: %s", node.name, e)  # shapes not known yet
                continue
            node.float_ops = int(stats.value or 0)
        if self._op_log is not None:
            for entry in self._op_log.log_entries:
                node = self._nodes.get(entry.name)
                if node is None:
                    continue
                node.types.update(entry.types)
                if entry.float_ops:
                    node.float_ops = entry.float_ops

    def add_step(self, step, run_meta):
        """Adds the measurements of a traced step (a RunMetadata with step_stats), as
        TensorFlow's profiler reads them: a node's time is its kernel time (op_end_rel_micros,
        at least 1us), each run counts once, memory is what its allocators report."""
        self._step_stats[step] = run_meta.step_stats
        for dev in run_meta.step_stats.dev_stats:
            device = dev.device.lower()
            for ns in dev.node_stats:
                name = ns.node_name
                if name in _SKIPPED_RUNTIME_NODES or "MEMCPY" in name:
                    continue
                node = self._nodes.get(name)
                if node is None:  # a node the runtime added: TensorFlow profiles it too
                    node = self._nodes[name] = ProfNode(name)
                    node.shapes = self._shapes
                if not node.device:
                    node.device = device
                    node.types.add(device)
                elif node.device != device:
                    continue
                first = step not in node.steps
                values = node.steps.setdefault(step, dict.fromkeys(STEP_STATS, 0))
                values["run_count"] += 1
                kernel = max(ns.op_end_rel_micros, 1)
                values["cpu_exec_micros"] += kernel
                start, end = node.times.get(step, (ns.all_start_micros, 0))
                end = max(end, ns.all_start_micros + kernel)
                node.times[step] = (min(start, ns.all_start_micros), end)
                if not first:
                    continue  # memory: the first run of the step (TensorFlow's ExecStep)
                for used in ns.memory:
                    values["requested_bytes"] += used.total_bytes
                    values["peak_bytes"] += used.peak_bytes
                    values["residual_bytes"] += used.live_bytes
                for out in ns.output:
                    alloc = out.tensor_description.allocation_description
                    values["output_bytes"] += max(alloc.requested_bytes, alloc.allocated_bytes)
                    self._shapes.record(name, out.slot, out.tensor_description)
        self._count_flops()

    def op_log(self, add_trace=False) -> OpLogProto:
        """What the profiler knows beyond the graph: extra types and float ops per node, and
        with `add_trace` every op with the Python calls that created it (CodeDef traces whose
        strings are in id_to_string), as TensorFlow's tfprof_logger writes it."""
        out = OpLogProto()
        ids: dict[str, int] = {}

        def string_id(text):
            return ids.setdefault(text, len(ids))

        for node in self._nodes.values():
            extra = sorted(node.types - {node.op_type, node.device})
            traced = add_trace and node.op is not None
            if not (extra or node.float_ops or traced):
                continue
            entry = out.log_entries.add(name=node.name, float_ops=node.float_ops, types=extra)
            if traced:
                for file, line, function in user_stack(node.op._raw_stack):
                    entry.code_def.traces.add(
                        file_id=string_id(file),
                        lineno=line,
                        function_id=string_id(function),
                        line_id=string_id(linecache.getline(file, line).strip()),
                        func_start_line=-1,
                    )
        for text, i in ids.items():
            out.id_to_string[i] = text
        return out

    # -- views ------------------------------------------------------------------------------
    def profile_name_scope(self, options):
        """The scope view: returns a GraphNodeProto tree rooted at _TFProfRoot."""
        return self._profile("scope", options)

    def profile_graph(self, options):
        """The graph view (inputs as children): returns a GraphNodeProto tree."""
        return self._profile("graph", options)

    def profile_operations(self, options):
        """The op-type view: returns a MultiGraphNodeProto."""
        return self._profile("op", options)

    def profile_python(self, options):
        """The code view (code_view.py): ops by the Python calls that created them; returns
        a MultiGraphNodeProto tree."""
        return self._profile("code", options)

    def advise(self, options=None):
        """Runs the advisor's checkers (advisor.py) on what was added; returns AdviceProto."""
        return advisor.advise(self, options)

    def serialize_to_string(self):
        raise NotImplementedError(
            "Profiler.serialize_to_string: profiles are not serialized by flowgraph"
        )

    def _profile(self, cmd, options):
        opts = _check_options(options)
        kind, _, rest = opts["output"].partition(":")
        if kind == "timeline" and cmd == "op":
            raise NotImplementedError(
                "with_timeline_output: the op view has no timeline (as in TensorFlow); "
                "use the scope or graph view"
            )
        # The views recurse along the tree; a graph view of a long chain is as deep as it.
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * len(self._nodes) + 1000))
        if cmd == "op":
            result, text = op_view.OpView(opts).show(self._nodes)
        elif cmd == "code":
            result, text = code_view.CodeView(opts).show(code_view.code_root(self._nodes))
        else:
            root = (report.scope_root if cmd == "scope" else report.graph_root)(self._nodes)
            result, text = report.TreeView(opts, graph_view=cmd == "graph").show(root)
        target = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
        if kind == "stdout":
            sys.stdout.write(
                report.OPTIONS_BANNER
                + report.option_text(opts)
                + report.REPORT_BANNER
                + report.doc(cmd, opts)
                + text
                + report.FOOTER
            )
            sys.stdout.flush()
        elif kind == "file":
            with open(target["outfile"], "w") as f:
                f.write(report.doc(cmd, opts) + text)
        elif kind == "timeline":
            self._write_timeline(opts["step"], target["outfile"])
        return result

    def _write_timeline(self, step, path):
        """The Chrome trace of traced step `step`, written to "<path>_<step>" as TensorFlow
        names it (flowgraph draws the step's StepStats as client/timeline.py does)."""
        from flowgraph.client import timeline

        if step < 0:
            raise ValueError(
                "with_timeline_output needs with_step(step) of an added step "
                f"(TensorFlow: 'Must specify -step option'); steps: {sorted(self._step_stats)}"
            )
        if step not in self._step_stats:
            raise ValueError(f"step {step} was not added; steps: {sorted(self._step_stats)}")
        trace = timeline.Timeline(self._step_stats[step]).generate_chrome_trace_format(
            show_memory=True
        )
        with open(f"{path}_{step}", "w") as f:
            f.write(trace)


def _check_options(options) -> dict:
    opts = copy.deepcopy(ALL_DEFAULTS)
    unknown = set(options) - set(opts)
    if unknown:
        raise ValueError(f"Unknown profile options: {sorted(unknown)}")
    opts.update(options)
    bad = sorted(set(opts["select"]) - set(SELECTABLE))
    if bad:
        raise ValueError(f"select: {bad} not in {SELECTABLE}")
    if opts["order_by"] not in ORDERABLE:
        raise ValueError(f"order_by: {opts['order_by']!r} is not one of {ORDERABLE}")
    kind, _, rest = opts["output"].partition(":")
    if kind not in ("stdout", "file", "timeline", "none", "pprof"):
        raise ValueError(f"Unknown profile output {opts['output']!r}")
    if kind == "pprof":
        raise NotImplementedError("profile output 'pprof' is not written by flowgraph")
    if kind in ("file", "timeline") and "outfile=" not in rest:
        raise ValueError(f"profile output {opts['output']!r} needs outfile=PATH")
    return opts


_DEFAULT_PROFILE_OPTIONS = 0


def profile(graph=None, run_meta=None, op_log=None, cmd="scope", options=_DEFAULT_PROFILE_OPTIONS):
    """Profiles `graph` (default: the default graph), measured by `run_meta` if given.

    Args:
      cmd: 'scope' (name scopes), 'graph' (data flow), 'op' (by op type) or 'code' (by the
        Python calls that created the ops).
      options: a dict from ProfileOptionBuilder; default: trainable variables' parameters.
    Returns: a GraphNodeProto (scope, graph) or MultiGraphNodeProto (op) of what was shown.
    """
    if cmd not in _COMMANDS:
        raise ValueError(f"cmd must be one of {_COMMANDS}, got {cmd!r}")
    if options is _DEFAULT_PROFILE_OPTIONS or options == _DEFAULT_PROFILE_OPTIONS:
        options = ProfileOptionBuilder.trainable_variables_parameter()
    profiler = Profiler(graph, op_log)
    if run_meta is not None:
        profiler.add_step(0, run_meta)
    views = {
        "scope": profiler.profile_name_scope,
        "graph": profiler.profile_graph,
        "op": profiler.profile_operations,
        "code": profiler.profile_python,
    }
    return views[cmd](options)


def advise(graph=None, run_meta=None, options=None):
    """Advice on `graph` measured by `run_meta`: {checker: reports} in an AdviceProto, also
    printed. options: {checker name: {}} (default ALL_ADVICE, every checker)."""
    profiler = Profiler(graph)
    if run_meta is not None:
        profiler.add_step(0, run_meta)
    return profiler.advise(options)


def write_op_log(graph, log_dir, op_log=None, run_meta=None, add_trace=True):
    """Writes `op_log` (an OpLogProto), completed with the graph's trainable-variable types,
    float ops and (add_trace) each op's creating calls, to `<log_dir>/tfprof_log`."""
    import os

    profiler = Profiler(graph, op_log)
    if run_meta is not None:
        profiler.add_step(0, run_meta)
    out = profiler.op_log(add_trace=add_trace)
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "tfprof_log"), "wb") as f:
        f.write(out.SerializeToString())
    return out

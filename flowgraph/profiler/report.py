"""The profiler's views and their text, as TensorFlow's tfprof builds and prints them
(model_analyzer.py states the rules; tests compare the text with TensorFlow's).

scope and graph views are trees of ShowNodes. A view first *accounts*: a node counts if one of
its types matches account_type_regexes; its totals add its own values and its accounted
descendants' (the scope view keeps an uncounted scope that has counted descendants, the graph
view passes them up to the nearest counted ancestor). Then it *prints*: a node is shown if it is
at most max_depth deep (the root is depth 1), passes the min_* filters (bytes and times on
totals; params, float ops and occurrence on its own values), show/hide_name_regexes; the shown
children of a hidden node move up to its nearest shown ancestor; trim_name_regexes stops the
descent. With account_displayed_op_only a shown node's totals are recomputed from itself and its
shown descendants. The op view has one row per op type, sorted, each row's totals covering the
rows below it (the cumulative percentage of the report; op_view.py).
"""

from __future__ import annotations

import re

from flowgraph.core.protos.tfprof_output_pb2 import GraphNodeProto

ROOT = "_TFProfRoot"
SCOPE_PARENT = "_kTFScopeParent"
FIELDS = ("run_count", "exec_micros", "accelerator_exec_micros", "cpu_exec_micros")
FIELDS += ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes")
FIELDS += ("parameters", "float_ops")
# order_by attribute -> the total it sorts by (descending); "name" sorts by name.
ORDER_TOTALS = {
    "bytes": "requested_bytes",
    "peak_bytes": "peak_bytes",
    "residual_bytes": "residual_bytes",
    "output_bytes": "output_bytes",
    "micros": "exec_micros",
    "accelerator_micros": "accelerator_exec_micros",
    "cpu_micros": "cpu_exec_micros",
    "params": "parameters",
    "float_ops": "float_ops",
}
# min_* option -> (statistic, whether the scope/graph filter reads the total)
MINIMA = {
    "min_bytes": ("requested_bytes", True),
    "min_peak_bytes": ("peak_bytes", True),
    "min_residual_bytes": ("residual_bytes", True),
    "min_output_bytes": ("output_bytes", True),
    "min_micros": ("exec_micros", True),
    "min_accelerator_micros": ("accelerator_exec_micros", True),
    "min_cpu_micros": ("cpu_exec_micros", True),
    "min_params": ("parameters", False),
    "min_float_ops": ("float_ops", False),
    "min_occurrence": ("run_count", False),
}
TIMES = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros")
MEMORY = {"bytes": "requested_bytes", "peak_bytes": "peak_bytes"}
MEMORY |= {"residual_bytes": "residual_bytes", "output_bytes": "output_bytes"}
MEMORY_LABELS = {"bytes": "requested bytes", "peak_bytes": "peak bytes"}
MEMORY_LABELS |= {"residual_bytes": "residual bytes", "output_bytes": "output bytes"}

_DOC = {
    "bytes": "requested bytes: The memory requested by the operation, accumulatively.",
    "micros": "total execution time: Sum of accelerator execution time and cpu execution time."
    "\ncpu execution time: The time from the start to the end of the operation. It's the sum "
    "of actual cpu run time plus the time that it spends waiting if part of computation is "
    "launched asynchronously.\naccelerator execution time: Time spent executing on the "
    "accelerator. This is normally measured by the actual hardware library.",
    "params": "param: Number of parameters (in the Variable).",
    "float_ops": "flops: Number of float operations. Note: Please read the implementation for "
    "the math behind it.",
    "tensor_value": "tensor_value: Not supported now.",
    "device": "device: which device is placed on.",
    "op_types": "op_types: The attributes of the operation, includes the Kernel name device "
    "placed on and user-defined strings.",
    "occurrence": "occurrence: The number of times it occurs",
    "input_shapes": "input shape: The shape of input tensors",
    "accelerator_micros": "accelerator execution time: Time spent executing on the "
    "accelerator. This is normally measured by the actual hardware library.",
    "cpu_micros": "cpu execution time: The time from the start to the end of the operation. "
    "It's the sum of actual cpu run time plus the time that it spends waiting if part of "
    "computation is launched asynchronously.",
    "peak_bytes": "peak bytes: The peak amount of memory that the operation is holding at "
    "some point.",
    "residual_bytes": "residual bytes: The memory not de-allocated after the operation finishes.",
    "output_bytes": "output bytes: The memory that is output from the operation (not "
    "necessarily allocated by the operation)",
}
_SCOPE_DOC = (
    "scope: The nodes in the model graph are organized by their names, which is hierarchical "
    "like filesystem."
)
_VIEW_DOC = {
    "scope": _SCOPE_DOC,
    "graph": _SCOPE_DOC,  # sic: TensorFlow documents the graph view with the scope text
    "code": "code: When python trace is available, the nodes are python lines and their are "
    "organized by the python call stack.",
    "op": "op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes "
    "belonging to the same type are aggregated together.",
}
OPTIONS_BANNER = "\n=========================Options=============================\n"
REPORT_BANNER = "\n==================Model Analysis Report======================\n"
FOOTER = "\n======================End of Report==========================\n"
# The option lines, in TensorFlow's order.
OPTION_ORDER = ("max_depth", "min_bytes", "min_peak_bytes", "min_residual_bytes")
OPTION_ORDER += ("min_output_bytes", "min_micros", "min_accelerator_micros", "min_cpu_micros")
OPTION_ORDER += ("min_params", "min_float_ops", "min_occurrence", "step", "order_by")
OPTION_ORDER += ("account_type_regexes", "start_name_regexes", "trim_name_regexes")
OPTION_ORDER += ("show_name_regexes", "hide_name_regexes", "account_displayed_op_only")
OPTION_ORDER += ("select", "output")


# -- number formats (TensorFlow's tfprof_utils) -------------------------------------------
def fmt_number(n) -> str:
    for scale, suffix in ((1e9, "b"), (1e6, "m"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{int(n)}"


def fmt_bytes(n) -> str:
    for scale, suffix in ((1e6, "MB"), (1e3, "KB")):  # no GB: TensorFlow stops at MB
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{int(n)}B"


def fmt_time(us) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f}sec"
    if us >= 1e3:
        return f"{us / 1e3:.2f}ms"
    return f"{int(us)}us"


def fmt_dims(dims) -> str:
    return "x".join(str(d) for d in dims)


def _matches(regexes, name) -> bool:
    return any(re.fullmatch(r, name) for r in regexes)


def _zeros() -> dict:
    return dict.fromkeys(FIELDS, 0)


def option_text(opts) -> str:
    """The options block TensorFlow prints before a report on stdout."""
    lines = []
    for key in OPTION_ORDER:
        value = opts[key]
        if isinstance(value, bool):
            value = str(value).lower()
        elif key == "select":
            value = ",".join(sorted(set(value)))
        elif isinstance(value, list):
            value = ",".join(value)
        elif key == "output" and ":" not in value:
            value += ":"
        lines.append(f"-{key:<27}{value}\n")
    return "".join(lines)


def doc(cmd, opts) -> str:
    """The 'Doc:' preamble: the view and each selected column, then 'Profile:'."""
    helps = [_DOC[s] for s in sorted(set(opts["select"]))]
    return f"\nDoc:\n{_VIEW_DOC[cmd]}\n" + "\n".join(helps) + "\n\nProfile:\n"


def _legend(opts, columns) -> str:
    return "node name | " + " | ".join(columns) + "\n"


def _time_columns(select):
    if "micros" in select:
        return [("total execution time", "exec_micros")] + [
            ("accelerator execution time", "accelerator_exec_micros"),
            ("cpu execution time", "cpu_exec_micros"),
        ]
    out = []
    if "accelerator_micros" in select:
        out.append(("accelerator execution time", "accelerator_exec_micros"))
    if "cpu_micros" in select:
        out.append(("cpu execution time", "cpu_exec_micros"))
    return out


# -- scope and graph views --------------------------------------------------------------
class ShowNode:
    """A node of the scope or graph view: a profile node (None for a scope or the root),
    its own values at the chosen step and its totals."""

    def __init__(self, name, prof=None, types=()):
        self.name = name
        self.prof = prof
        self.types = set(prof.types) if prof is not None else set(types)
        self.children: list[ShowNode] = []
        self.show_children: list[ShowNode] = []
        self.account = False
        self.own = _zeros()
        self.total = _zeros()
        self.definitions = 0
        self.line = ""

    def reset(self):
        self.total = _zeros()
        self.definitions = 0

    def add_self(self):
        for k in FIELDS:
            self.total[k] += self.own[k]
        self.definitions += 1

    def aggregate(self, other):
        for k in FIELDS:
            self.total[k] += other.total[k]
        self.definitions += other.definitions


def scope_root(nodes) -> ShowNode:
    """The name hierarchy: 'a/b' is a child of 'a' (a scope node if no op is named 'a')."""
    by_name = {}
    for name in sorted(nodes):
        by_name[name] = ShowNode(name, nodes[name])
        while "/" in name:
            name = name.rpartition("/")[0]
            if name not in by_name:
                by_name[name] = ShowNode(name, None, (SCOPE_PARENT,))
    root = ShowNode(ROOT, None, (SCOPE_PARENT,))
    for name in sorted(by_name):
        parent = by_name[name.rpartition("/")[0]] if "/" in name else root
        parent.children.append(by_name[name])
    return root


def graph_root(nodes) -> ShowNode:
    """Data flow: a node's inputs (control inputs too) are its children; the root's children
    are the nodes that no node takes as input."""
    show = {name: ShowNode(name, nodes[name]) for name in sorted(nodes)}
    consumed = set()
    for name, node in show.items():
        for src in nodes[name].inputs:
            consumed.add(src)
            if src in show:
                node.children.append(show[src])
    root = ShowNode(ROOT, None, ("_kTFGraphParent",))
    root.children = [n for name, n in show.items() if name not in consumed]
    return root


class TreeView:
    """Accounts, filters, orders and prints a scope or graph tree (TFScope / TFGraph)."""

    def __init__(self, opts, graph_view: bool):
        self.opts = opts
        self.graph_view = graph_view
        self.select = set(opts["select"])

    def reaccount(self, node) -> bool:
        if node.prof is not None:
            node.own = node.prof.stats(self.opts["step"])
        regexes = self.opts["account_type_regexes"]
        if regexes == [".*"]:
            return True
        return any(_matches(regexes, t) for t in node.types)

    def account(self, nodes, visits) -> list:
        accounted = []
        for node in nodes:
            if self.graph_view:
                if node.name in visits:
                    continue
                visits.add(node.name)
            kids = self.account(node.children, visits)
            node.account = self.reaccount(node)
            keep = node.account or (kids and not self.graph_view)
            if keep:
                node.reset()
                node.add_self()
                for c in kids:
                    node.aggregate(c)
                node.show_children = kids
                accounted.append(node)
            elif self.graph_view:
                accounted.extend(kids)  # an uncounted node passes its children up
        return accounted

    def search_root(self, nodes, visits) -> list:
        found = []
        for node in nodes:
            if self.graph_view:
                if node.name in visits:
                    continue
                visits.add(node.name)
            if _matches(self.opts["start_name_regexes"], node.name):
                found.append(node)
            else:
                found.extend(self.search_root(node.show_children, visits))
        return found

    def should_show(self, node, depth) -> bool:
        o = self.opts
        if node.name == ROOT:
            return True
        for key, (field, on_total) in MINIMA.items():
            if (node.total if on_total else node.own)[field] < o[key]:
                return False
        if depth > o["max_depth"]:
            return False
        shows = o["show_name_regexes"] == [".*"] or _matches(o["show_name_regexes"], node.name)
        return shows and not _matches(o["hide_name_regexes"], node.name)

    def print_tree(self, nodes, depth, indent, visits) -> list:
        o = self.opts
        shown = []
        for node in nodes:
            if self.graph_view:
                if node.name in visits:
                    continue
                visits.add(node.name)
            show = self.should_show(node, depth)
            kids = []
            if not _matches(o["trim_name_regexes"], node.name) and depth <= o["max_depth"]:
                kids = self.print_tree(node.show_children, depth + 1, indent + 2 * show, visits)
            if not show:
                shown.extend(kids)
                continue
            if o["account_displayed_op_only"]:
                node.reset()
                node.add_self()
            node.show_children = sort_nodes(kids, o["order_by"])
            if o["account_displayed_op_only"]:
                for c in node.show_children:
                    node.aggregate(c)
            node.line = " " * indent + self.format_node(node) + "\n"
            shown.append(node)
        return shown

    def show(self, root):
        """Returns (GraphNodeProto, text) of the view rooted at `root`."""
        root.reset()
        roots = self.account(root.children, set())
        for n in roots:
            root.aggregate(n)
        if self.opts["start_name_regexes"] != [".*"]:
            roots = self.search_root(roots, set())
        root.show_children = roots
        (root,) = self.print_tree([root], 1, 0, set())
        text = [self.legend(), root.line]
        proto = self.proto(root)
        flatten(self, root, text, proto)
        return proto, "".join(text)

    def legend(self) -> str:
        s = self.select
        cols = [("params", "# parameters"), ("float_ops", "# float_ops")]
        names = [label for key, label in [*cols, *MEMORY_LABELS.items()] if key in s]
        names += [label for label, _ in _time_columns(s)]
        more = [("device", "assigned devices"), ("op_types", "op types")]
        more += [("occurrence", "op count (run|defined)"), ("input_shapes", "input shapes")]
        names += [label for key, label in more if key in s]
        return _legend(self.opts, names)

    def format_node(self, node) -> str:
        s, own, total = self.select, node.own, node.total

        def pair(fmt, field):
            return f"{fmt(own[field]) if node.account else '--'}/{fmt(total[field])}"

        info = []
        if "params" in s:
            dims = node.prof.shape if node.prof is not None else []
            if dims:
                info.append(fmt_dims(dims))
            info.append(pair(fmt_number, "parameters") + " params")
        if "float_ops" in s:
            info.append(pair(fmt_number, "float_ops") + " flops")
        info += [pair(fmt_bytes, field) for key, field in MEMORY.items() if key in s]
        info += [pair(fmt_time, field) for _, field in _time_columns(s)]
        if "device" in s and node.prof is not None and node.prof.device:
            info.append(node.prof.device)
        if "op_types" in s:
            info.append("|".join(sorted(node.types)))
        if "occurrence" in s:
            defined = f"{'1' if node.account else '--'}/{fmt_number(node.definitions)}"
            info.append(pair(fmt_number, "run_count") + "|" + defined)
        if "input_shapes" in s:
            shapes = node.prof.input_dims() if node.prof is not None else []
            info.append("|".join(input_dims_text(i, d) for i, d in enumerate(shapes)))
        return f"{node.name} ({', '.join(info)})"

    def proto(self, node) -> GraphNodeProto:
        out = GraphNodeProto(name=node.name)
        for field in FIELDS:
            setattr(out, field, node.own[field])
            setattr(out, "total_" + field, node.total[field])
        out.total_definition_count = node.definitions
        prof = node.prof
        if prof is not None:
            if prof.device:
                out.devices.append(prof.device)
            for shape in prof.output_shapes():
                out.shapes.add().CopyFrom(shape.as_proto())
            for i, shape in enumerate(prof.input_shapes()):
                out.input_shapes[i].CopyFrom(shape.as_proto())
        return out


def input_dims_text(i, dims) -> str:
    return f"{i}:{fmt_dims(dims)}" if dims else f"{i}:unknown"


def sort_nodes(nodes, order_by, occurrence=None):
    """TensorFlow's order: largest total first (ties keep name order), or by name."""
    nodes = sorted(nodes, key=lambda n: n.name)
    field = ORDER_TOTALS.get(order_by)
    if field is not None:
        return sorted(nodes, key=lambda n: -n.total[field])
    if order_by == "occurrence" and occurrence is not None:
        return sorted(nodes, key=lambda n: -occurrence(n))
    return nodes


# -- op view --------------------------------------------------------------------------------
class GroupView:
    """What the op view and the code view share: a row (or call site) groups graph nodes
    (`members`); the account_type_regexes pick which of them count, and the row is shown by
    totals (params, float ops, times, memory; not min_occurrence), depth and name regexes."""

    def __init__(self, opts):
        self.opts = opts
        self.select = set(opts["select"])

    def reaccount(self, row) -> bool:
        """Sums the picked members' stats into `row.own`; whether the row is accounted."""
        regexes, step = self.opts["account_type_regexes"], self.opts["step"]
        if regexes == [".*"]:
            row.picked = list(row.members)
        else:
            row.picked = [p for p in row.members if any(_matches(regexes, t) for t in p.types)]
        row.own, row.types, row.devices = _zeros(), set(), set()
        for p in row.picked:
            values = p.stats(step)
            for k in FIELDS:
                row.own[k] += values[k]
            row.types |= p.types
            row.devices.add(p.device)
        return bool(row.picked) or regexes == [".*"]

    def should_show(self, row, depth) -> bool:
        o = self.opts
        if row.name == ROOT:
            return True
        for key, (field, _) in MINIMA.items():
            if key != "min_occurrence" and row.total[field] < o[key]:
                return False
        if depth > o["max_depth"]:
            return False
        shows = o["show_name_regexes"] == [".*"] or _matches(o["show_name_regexes"], row.name)
        return shows and not _matches(o["hide_name_regexes"], row.name)

    def column_names(self) -> list:
        """The legend's column names, in the order the rows print them."""
        s = self.select
        names = [label for key, label in MEMORY_LABELS.items() if key in s]
        names += [label for label, _ in _time_columns(s)]
        more = [("params", "# parameters"), ("float_ops", "# float_ops")]
        more += [("device", "assigned devices"), ("op_types", "op types")]
        more += [("occurrence", "op occurrence (run|defined)"), ("input_shapes", "input shapes")]
        return names + [label for key, label in more if key in s]


def flatten(view, node, text: list, proto) -> None:
    """Appends the shown descendants of `node` to `text` (their lines, depth first) and to
    `proto` (each as `view.proto` builds it), as a tree view prints them."""
    for child in node.show_children:
        text.append(child.line)
        child_proto = proto.children.add()
        child_proto.CopyFrom(view.proto(child))
        flatten(view, child, text, child_proto)


def set_multi(proto, row):
    """Writes a row's own and total values into a MultiGraphNodeProto."""
    for field in FIELDS:
        if field == "run_count":
            continue  # MultiGraphNodeProto has no run count; its graph_nodes do
        setattr(proto, field, row.own[field])
        setattr(proto, "total_" + field, row.total[field])

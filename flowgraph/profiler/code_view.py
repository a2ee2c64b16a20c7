"""The profiler's code view (cmd="code", Profiler.profile_python): ops grouped by the Python
call stack that created them, as TensorFlow's tfprof builds it. Each node is a call site
"file.py:line:function"; its children are the calls it made; an op belongs to the innermost
site. Gradient ops ("gradients/<op>_grad/...") go under their forward op's sites, marked
" (gradient)". flowgraph keeps at most 16 frames per op, from the user's line outward, and
leaves out flowgraph's own frames (TensorFlow's stacks also show its library's frames).
"""

from __future__ import annotations

import os
import re
import sys

from flowgraph.core.protos.tfprof_output_pb2 import MultiGraphNodeProto
from flowgraph.framework.operation import user_stack
from flowgraph.profiler import report
from flowgraph.profiler.report import (
    MEMORY,
    ROOT,
    GroupView,
    ShowNode,
    _matches,
    _time_columns,
    fmt_bytes,
    fmt_number,
    fmt_time,
    sort_nodes,
)

GRADIENT = " (gradient)"
_GRAD = re.compile(r".*?gradients/(.+?)_grad/")


def trace_name(file, line, function) -> str:
    """TensorFlow's short name of a call site: file base name, line, function (cut at 17)."""
    function = function if len(function) < 20 else function[:17] + "..."
    return f"{os.path.basename(file)}:{line}:{function}"


class CodeNode(ShowNode):
    """A call site: the ops created there (members) and the sites it called (children)."""

    def __init__(self, name):
        super().__init__(name)
        self.members = []
        self.picked = []
        self.devices = set()
        self.by_name: dict[str, CodeNode] = {}

    def child(self, name) -> CodeNode:
        node = self.by_name.get(name)
        if node is None:
            node = self.by_name[name] = CodeNode(name)
            self.children.append(node)
        return node


def code_root(nodes) -> CodeNode:
    """The tree of call sites of the graph's ops (ops in name order, as TensorFlow adds them)."""
    root = CodeNode(ROOT)
    paths, grads = {}, {}
    for name in sorted(nodes):
        prof = nodes[name]
        stack = getattr(prof.op, "_raw_stack", None)
        if not stack:
            continue  # no Python stack: nodes only the runtime ran
        m = _GRAD.match(name)
        if m:
            grads.setdefault(m[1], []).append(prof)
            continue
        paths[name] = [trace_name(*frame) for frame in user_stack(stack)]
        leaf = root
        for site in paths[name]:
            leaf = leaf.child(site)
        leaf.members.append(prof)
    lost = 0
    for forward, members in sorted(grads.items()):
        if forward not in paths:
            lost += 1
            continue
        leaf = root
        for site in paths[forward]:
            leaf = leaf.child(site + GRADIENT)
        leaf.members.extend(members)
    if lost:
        sys.stderr.write(f"{lost} gradient nodes not accounted\n")
    return root


class CodeView(GroupView):
    """TFCode: account, filter and print the call-site tree (model_analyzer.py's rules, with
    the op view's filters: params and float ops on totals, no min_occurrence)."""

    def account(self, nodes) -> list:
        accounted = []
        for node in nodes:
            kids = self.account(node.children)
            node.account = self.reaccount(node)
            if node.account or kids:
                node.reset()
                node.add_self()
                for c in kids:
                    node.aggregate(c)
                node.show_children = kids
                accounted.append(node)
        return accounted

    def search_root(self, nodes) -> list:
        found = []
        for node in nodes:
            if _matches(self.opts["start_name_regexes"], node.name):
                found.append(node)
            else:
                found.extend(self.search_root(node.show_children))
        return found

    def print_tree(self, nodes, depth, indent) -> list:
        o = self.opts
        shown = []
        for node in nodes:
            if _matches(o["trim_name_regexes"], node.name) or depth > o["max_depth"]:
                continue
            show = self.should_show(node, depth)
            kids = self.print_tree(node.show_children, depth + 1, indent + 2 * show)
            if not show:
                shown.extend(kids)
                continue
            node.show_children = sort_nodes(kids, o["order_by"], occurrence=lambda n: len(n.picked))
            node.line = " " * indent + self.format_node(node) + "\n"
            shown.append(node)
        return shown

    def show(self, root):
        """Returns (MultiGraphNodeProto, text)."""
        if self.opts["account_displayed_op_only"]:
            sys.stderr.write("Note: code view ignores account_displayed_op_only\n")
        root.reset()
        roots = self.account(root.children)
        for n in roots:
            root.aggregate(n)
        if self.opts["start_name_regexes"] != [".*"]:
            roots = self.search_root(roots)
        root.show_children = roots
        (root,) = self.print_tree([root], 1, 0)
        text = [self.legend(), root.line]
        proto = self.proto(root)
        report.flatten(self, root, text, proto)
        return proto, "".join(text)

    def legend(self) -> str:
        return "node name | " + " | ".join(self.column_names()) + "\n"

    def format_node(self, node) -> str:
        s, own, total = self.select, node.own, node.total

        def pair(fmt, field):
            return f"{fmt(own[field]) if node.account else '--'}/{fmt(total[field])}"

        attrs = [pair(fmt_bytes, field) for key, field in MEMORY.items() if key in s]
        attrs += [pair(fmt_time, field) for _, field in _time_columns(s)]
        if "params" in s:
            attrs.append(pair(fmt_number, "parameters") + " params")
        if "float_ops" in s:
            attrs.append(pair(fmt_number, "float_ops") + " flops")
        if "device" in s and node.devices:
            attrs.append("|".join(sorted(node.devices)))
        if "op_types" in s:
            attrs.append("|".join(sorted(node.types)))
        if "occurrence" in s:
            attrs.append("occurrence N/A in code view")
        if "input_shapes" in s:
            attrs.append("input_shapes N/A in code view")
        return f"{node.name} ({', '.join(attrs)})"

    def proto(self, node) -> MultiGraphNodeProto:
        step = self.opts["step"]
        out = MultiGraphNodeProto(name=node.name)
        report.set_multi(out, node)
        for p in node.picked:
            g = out.graph_nodes.add(name=p.name)
            for field, value in p.stats(step).items():
                setattr(g, field, value)
        return out

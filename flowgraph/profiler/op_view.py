"""The profiler's op view (cmd="op"): one row per op type, as TensorFlow's tfprof prints it.

Rows are sorted by `order_by`; each accounted row's totals add the rows printed after it, so
the first percentage of a row is cumulative, the second its own share (the report's "(accu,
self)" columns). Accounting and filters are the code view's (report.GroupView).
"""

from __future__ import annotations

from flowgraph.core.protos.tfprof_output_pb2 import MultiGraphNodeProto
from flowgraph.profiler.report import (
    MEMORY,
    ROOT,
    GroupView,
    ShowNode,
    _legend,
    _matches,
    _time_columns,
    fmt_bytes,
    fmt_number,
    fmt_time,
    input_dims_text,
    set_multi,
    sort_nodes,
)


class OpRow(ShowNode):
    """One op type: the sum of its graph nodes that match account_type_regexes."""

    def __init__(self, name, members):
        super().__init__(name)
        self.members = members  # every node of the type
        self.picked = []  # those accounted at this step
        self.devices = set()


class OpView(GroupView):
    """TFOp: rows of op types, sorted; each row's totals add the rows after it."""

    def show(self, nodes):
        """Returns (MultiGraphNodeProto, text)."""
        o = self.opts
        by_type: dict[str, list] = {}
        for name in sorted(nodes):
            by_type.setdefault(nodes[name].op_type, []).append(nodes[name])
        rows = [OpRow(t, members) for t, members in sorted(by_type.items())]
        for row in rows:
            row.account = self.reaccount(row)
            row.reset()
            row.add_self()
        rows = sort_nodes(rows, o["order_by"], occurrence=lambda r: len(r.picked))
        accounted = [r for r in rows if r.account]
        for below, row in zip(reversed(accounted), list(reversed(accounted))[1:]):
            row.aggregate(below)  # cumulative: each row adds the (already summed) next
        root = OpRow(ROOT, [])
        if accounted:
            root.aggregate(accounted[0])
        start = 0
        if o["start_name_regexes"] not in ([], [".*"]):
            start = next(
                (i for i, r in enumerate(accounted) if _matches(o["start_name_regexes"], r.name)),
                len(accounted),
            )
        shown = []
        for depth, row in enumerate(accounted[start:]):
            if _matches(o["trim_name_regexes"], row.name) or depth > o["max_depth"]:
                break
            if self.should_show(row, depth):
                shown.append(row)
        if o["account_displayed_op_only"]:
            below = None
            for row in reversed(shown):
                row.reset()
                row.add_self()
                if below is not None:
                    row.aggregate(below)
                below = row
            root.reset()
            if below is not None:
                root.aggregate(below)
        text = self.legend() + "".join(self.format_row(r, root) for r in shown)
        return self.proto(root, shown), text

    def legend(self) -> str:
        return _legend(self.opts, self.column_names())

    def format_row(self, row, root) -> str:
        s, step = self.select, self.opts["step"]
        own, total, grand = row.own, row.total, root.total

        def share(field, text, by_own=False):
            accu = pct = 0.0
            if (own if by_own else total)[field] > 0:
                accu = 100.0 * total[field] / grand[field]
                pct = 100.0 * own[field] / grand[field]
            return f"{f'{text} ({accu:.2f}%, {pct:.2f}%)':>30}"

        attrs = [
            share(field, fmt_bytes(own[field]), by_own=True)
            for key, field in MEMORY.items()
            if key in s
        ]
        attrs += [share(field, fmt_time(own[field])) for _, field in _time_columns(s)]
        if "params" in s:
            attrs.append(share("parameters", fmt_number(own["parameters"]) + " params"))
        if "float_ops" in s:
            attrs.append(share("float_ops", fmt_number(own["float_ops"]) + " float_ops"))
        if "device" in s:
            attrs.append("|".join(sorted(row.devices)))
        if "op_types" in s:
            attrs.append("|".join(sorted(row.types)))
        if "occurrence" in s:
            runs = sum(p.stats(step)["run_count"] for p in row.picked)
            attrs.append(f"{f'{runs}|{len(row.picked)}':>10}")
        line = f"{row.name:<25}{', '.join(attrs)}\n"
        if "input_shapes" in s and row.picked:
            line = f"{line}\n{self.input_types(row)}\n\n"
        return line

    def input_types(self, row) -> str:
        """Each distinct list of input shapes: how many nodes have it, runs and time."""
        step = self.opts["step"]
        kinds: dict[str, list] = {}
        for p in row.picked:
            dims = ",\t".join(input_dims_text(i, d) for i, d in enumerate(p.input_dims()))
            v = p.stats(step)
            acc = kinds.setdefault(f"input_type: {dims}", [0, 0, 0])
            acc[0] += 1
            acc[1] += v["run_count"]
            acc[2] += v["exec_micros"]
        ordered = sorted(sorted(kinds.items()), key=lambda kv: -kv[1][1])
        return "\n".join(
            f"{k}\t(run*{runs}|defined*{n})\texec_time: {fmt_time(us)}"
            for k, (n, runs, us) in ordered
        )

    def proto(self, root, shown) -> MultiGraphNodeProto:
        step = self.opts["step"]
        out = MultiGraphNodeProto(name=ROOT)
        set_multi(out, root)
        parent = out
        for row in shown:
            child = parent.children.add(name=row.name)
            set_multi(child, row)
            for p in row.picked:
                g = child.graph_nodes.add(name=p.name)
                for field, value in p.stats(step).items():
                    setattr(g, field, value)
                if p.device:
                    g.devices.append(p.device)
                for i, shape in enumerate(p.input_shapes()):
                    g.input_shapes[i].CopyFrom(shape.as_proto())
            parent = child
        return out

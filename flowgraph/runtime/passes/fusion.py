"""Compiled fusion (whitepaper §10; TensorFlow's XLA auto-clustering): maximal clusters of
element-wise nodes, which may end in reductions of their values, become one `_FusedElementwise`
node whose kernel is one compiled loop (kernels/cpu/fused.py).

Which nodes: those whose op is a row of `fused_codegen.ELEMENTWISE` with dtypes it computes, or
a reduction of `fused_codegen.REDUCTIONS` over constant axes (it joins the cluster of the value
it reduces, and no member reads its result: the loop accumulates it as the last thing), on a
CPU device, reading no reference, and marked for compilation: every node under
`OptimizerOptions.global_jit_level` ON_1/ON_2 (or `cpu_global_jit`), else only nodes with the
`_XlaCompile` attr that `jit_scope()` sets. `_XlaCompile=False` keeps a node out; targets stay
out (the caller names them), and so do nodes reading a reference (a variable's buffer, read when
the node runs, which an in-place update later in the step changes). Two nodes joined by a data
edge share a cluster when they are on one device, in one `_XlaScope` and *dead under the same
conditions*: each node's deadness key is the set of Switch outputs (and Merge and Exit nodes)
its value depends on, so a cluster is never made dead by an input that the unfused member would
not have read, and never spans frames (Enter and Exit are not element-wise).

A cluster then takes in the updates of its values to variables (`_Graph.fold_assigns`): its
kernel writes them into the variables' buffers in place. Such an update moves from its own node
into the fused node, so the fused node waits for the update's control inputs (what must read
the old value) and the update's control consumers wait for the fused node.

A fused node runs when all its inputs have arrived, so a member the rest of the graph reads (an
output, or a control input of another node) must not wait for a feed it does not itself need:
in a partial run the client fetches such a value before it feeds the rest. A cluster where one
does is split (`_Graph._split_by_feeds`).

Merging must not create a cycle: two clusters joined by an edge u -> v may not merge while
another path leads from one to the other through nodes outside both. Nodes are visited in
topological order (loop back edges out of NextIteration cut) and a node joins clusters only when
it is visited, so every clustered node precedes the visited node v; such a path then runs through
nodes that precede v, and the search for it stops at v's position.
"""

from __future__ import annotations

import heapq

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.device_spec import DeviceSpec
from flowgraph.core.protos import GraphDef
from flowgraph.kernels.cpu import fused_codegen
from flowgraph.runtime.nodes import Node, make_node

_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})
_FRESH_DEADNESS_OPS = frozenset({"Merge", "RefMerge", "Exit", "RefExit"})
_SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
_VARIABLE_OPS = frozenset({"VariableV2", "Variable"})
_ON_1, _ON_2 = 1, 2


def global_jit(config) -> bool:
    """Whether every node is marked for compilation (TF's auto-clustering options)."""
    opts = config.graph_options.optimizer_options
    return opts.global_jit_level in (_ON_1, _ON_2) or opts.cpu_global_jit


def fuse(nodes: list[Node], global_jit_on: bool, keep: frozenset) -> list[Node]:
    """Returns `nodes` with every cluster of two or more fusable nodes replaced by one fused
    node; consumers read its outputs and wait on it where they waited on a member."""
    by_name = {n.name: n for n in nodes}
    candidate = [_candidate(n, global_jit_on, keep, by_name) for n in nodes]
    if sum(candidate) < 2:
        return nodes
    graph = _Graph(nodes)
    if graph.order is None:  # a cycle outside loops: not a graph the executor runs
        return nodes
    clusters = graph.clusters(candidate)
    if not clusters:
        return nodes
    return _rewrite(nodes, graph.fold_assigns(clusters, keep))


def _candidate(n: Node, global_jit_on: bool, keep: frozenset, by_name: dict) -> bool:
    marked = n.attrs.get("_XlaCompile")
    if n.name in keep or marked is False or (marked is None and not global_jit_on):
        return False
    if any(by_name[s].output_types[p].is_ref_dtype for s, p in n.inputs if s in by_name):
        return False  # reads a variable's buffer when it runs: its own time, not the cluster's
    if DeviceSpec.from_string(n.device or None).device_type not in (None, "CPU"):
        return False
    types = n.input_types + n.output_types
    if any(t.is_ref_dtype for t in types) or not all(_numpy_type(t) for t in types):
        return False
    if n.op in fused_codegen.REDUCTIONS:  # axes known when the plan is made: a constant
        axes = by_name.get(n.inputs[1][0])
        if axes is None or axes.op != "Const":
            return False
    return fused_codegen.fusable(
        n.op,
        [_numpy_type(t) for t in n.input_types],
        [_numpy_type(t) for t in n.output_types],
        n.attrs,
    )


def _numpy_type(t: dtypes.DType):
    try:
        return np.dtype(t.as_numpy_dtype)
    except TypeError:
        return None


class _Graph:
    """Edges by node index, a topological order and each node's deadness key."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        index = {n.name: i for i, n in enumerate(nodes)}
        self.index = index
        n = len(nodes)
        self.preds: list[list[int]] = [[] for _ in range(n)]
        self.succ: list[list[int]] = [[] for _ in range(n)]
        for i, node in enumerate(nodes):
            for src in [s for s, _ in node.inputs] + list(node.control):
                j = index.get(src)
                if j is not None and nodes[j].op not in _BACK_EDGE_OPS:
                    self.preds[i].append(j)
                    self.succ[j].append(i)
        self.order = self._topological()
        if self.order is not None:
            self.rank = [0] * n
            for r, i in enumerate(self.order):
                self.rank[i] = r
            self.deadness = self._deadness()
            self.feeds = self._feeds()

    def _topological(self):
        count = [len(p) for p in self.preds]
        ready = [i for i, c in enumerate(count) if not c]
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for j in self.succ[i]:
                count[j] -= 1
                if not count[j]:
                    heapq.heappush(ready, j)
        return order if len(order) == len(self.nodes) else None

    def _deadness(self) -> list[frozenset]:
        """What can make each node dead: the (predicate, branch) of each Switch output it
        reads, directly or through its inputs (two Switches on one predicate make the same
        branches, as TF's deadness analysis has it), and each Merge or Exit it reads."""
        empty: frozenset = frozenset()
        key = [empty] * len(self.nodes)
        for i in self.order:
            node = self.nodes[i]
            if node.op in _FRESH_DEADNESS_OPS:
                key[i] = frozenset({(node.name, -1)})
                continue
            k = set()
            for src, port in node.inputs:
                j = self.index[src]
                k |= key[j]
                if self.nodes[j].op in _SWITCH_OPS:
                    k.add((self._predicate(j), port))
            for c in node.control:
                j = self.index[c]
                k |= key[j]
                if self.nodes[j].op in _SWITCH_OPS:
                    k |= {(self._predicate(j), 0), (self._predicate(j), 1)}
            key[i] = frozenset(k) if k else empty
        return key

    def _feeds(self) -> list[frozenset]:
        """The fed tensors (feed `_Recv` nodes) each node waits for."""
        empty: frozenset = frozenset()
        feeds = [empty] * len(self.nodes)
        for i in self.order:
            if self.nodes[i].op == "_Recv":
                feeds[i] = frozenset({i})
            elif self.preds[i]:
                parts = {feeds[j] for j in self.preds[i]}
                feeds[i] = empty.union(*parts) if len(parts) > 1 else parts.pop()
        return feeds

    def _split_by_feeds(self, cluster: list[int]) -> list[list[int]]:
        """`cluster`, or, where a member read outside it would wait for a feed it does not
        need, its parts by key: a member's key is its own feeds when it is read outside, and
        otherwise its consumers' key where they share one that covers its feeds. Keys only
        grow along edges, so the parts are connected pieces of one key and form no cycle."""
        inside = set(cluster)
        observed = {i for i in cluster if any(j not in inside for j in self.succ[i])}
        needed = frozenset().union(*(self.feeds[i] for i in cluster))
        if all(self.feeds[i] == needed for i in observed):
            return [cluster]
        key: dict[int, frozenset] = {}
        for i in reversed(cluster):  # consumers first
            keys = {key[j] for j in self.succ[i] if j in inside}
            if i not in observed and len(keys) == 1 and self.feeds[i] <= next(iter(keys)):
                key[i] = keys.pop()
            else:
                key[i] = self.feeds[i]
        parts: dict[frozenset, list[int]] = {}
        for i in cluster:
            parts.setdefault(key[i], []).append(i)
        return [c for p in parts.values() for c in self._connected(p) if len(c) > 1]

    def _connected(self, members: list[int]) -> list[list[int]]:
        """The weakly connected components of `members`, each in topological order."""
        left = set(members)
        comps = []
        for start in members:
            if start not in left:
                continue
            left.discard(start)
            comp, stack = [], [start]
            while stack:
                i = stack.pop()
                comp.append(i)
                for j in self.succ[i] + self.preds[i]:
                    if j in left:
                        left.discard(j)
                        stack.append(j)
            comps.append(sorted(comp, key=self.rank.__getitem__))
        return comps

    def _predicate(self, switch: int) -> tuple:
        """The tensor a Switch's predicate input comes from, seen through Identity nodes."""
        src, port = self.nodes[switch].inputs[1]
        while True:
            node = self.nodes[self.index[src]]
            if node.op != "Identity" or node.control:
                return src, port
            src, port = node.inputs[0]

    def clusters(self, candidate: list[bool]) -> list[list[int]]:
        """Clusters (node indices in topological order) of two or more members."""
        parent = list(range(len(self.nodes)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        members: dict[int, list[int]] = {}
        outside: dict[int, set[int]] = {}  # cluster -> successors of its members outside it
        reductions: dict[int, set[int]] = {}  # cluster -> its reductions
        reads: dict[int, set[int]] = {}  # cluster -> the reductions its members read

        def reaches(src: int, dst: int, limit: int) -> bool:
            """A path src -> ... -> dst through nodes outside both (ranks up to `limit`)."""
            stack = [w for w in outside[src] if find(w) != dst]
            seen = set()
            while stack:
                w = stack.pop()
                if self.rank[w] > limit:
                    continue
                c = find(w)
                if c == dst:
                    return True
                if c in seen:
                    continue
                seen.add(c)
                stack.extend(outside[c] if c in outside else self.succ[w])
            return False

        for v in self.order:
            if not candidate[v]:
                continue
            members[v], outside[v] = [v], set(self.succ[v])
            inputs = self.nodes[v].inputs
            reductions[v] = set()
            if self.nodes[v].op in fused_codegen.REDUCTIONS:
                inputs = inputs[:1]  # joins what it reduces, never what gives its axes
                reductions[v].add(v)
            reads[v] = {self.index[src] for src, _ in self.nodes[v].inputs}
            reads[v] = {u for u in reads[v] if self.nodes[u].op in fused_codegen.REDUCTIONS}
            for src, _ in inputs:
                u = self.index[src]
                if not candidate[u] or not self._joinable(u, v):
                    continue
                a, b = find(u), find(v)
                limit = self.rank[v]
                if a == b or reaches(a, b, limit) or reaches(b, a, limit):
                    continue
                if reductions[a] & reads[b] or reductions[b] & reads[a]:
                    continue  # a cluster ends in its reductions: no member reads one
                if len(members[a]) < len(members[b]):
                    a, b = b, a
                parent[b] = a
                members[a] += members.pop(b)
                reductions[a] |= reductions.pop(b)
                reads[a] |= reads.pop(b)
                joined = outside[a] | outside.pop(b)
                outside[a] = {w for w in joined if find(w) != a}
        clusters = [sorted(m, key=self.rank.__getitem__) for m in members.values() if len(m) > 1]
        return [part for c in clusters for part in self._split_by_feeds(c)]

    def fold_assigns(self, clusters: list[list[int]], keep: frozenset) -> list[list[int]]:
        """`clusters`, each with the variable updates it can do in place appended: an Assign,
        AssignAdd or AssignSub of a member's value to a variable (a VariableV2 on the same
        device) that nothing reads but by control edges, not a target, not marked
        `_XlaCompile=False`, dead and fed as the cluster is, one per variable, and whose control
        inputs do not depend on the cluster (the fused node waits for them instead)."""
        read = {src for n in self.nodes for src, _ in n.inputs}
        cluster_of = {i: c for c, idx in enumerate(clusters) for i in idx}
        out = []
        for c, idx in enumerate(clusters):
            feeds = frozenset().union(*(self.feeds[i] for i in idx))
            folded, variables = [], set()
            for i in idx:
                for j in self.succ[i]:
                    node = self.nodes[j]
                    if j in cluster_of or node.op not in fused_codegen.ASSIGN_OPS:
                        continue
                    var = self.index.get(node.inputs[0][0])
                    if (
                        var is None
                        or var in variables
                        or node.inputs[1][0] != self.nodes[i].name
                        or self.nodes[i].op in fused_codegen.REDUCTIONS
                        or node.name in keep
                        or node.name in read
                        or node.attrs.get("_XlaCompile") is False
                        or self.nodes[var].op not in _VARIABLE_OPS
                        or not node.device == self.nodes[var].device == self.nodes[i].device
                        or self.deadness[j] != self.deadness[i]
                        or self.feeds[j] != feeds
                        or any(self._depends(self.index[d], c, cluster_of) for d in node.control)
                    ):
                        continue
                    folded.append(j)
                    variables.add(var)
                    cluster_of[j] = c
            out.append(sorted(idx + folded, key=self.rank.__getitem__) if folded else idx)
        return out

    def _depends(self, start: int, c: int, cluster_of: dict) -> bool:
        """Whether node `start` depends on cluster `c` once every cluster is one node."""
        members: dict[int, list[int]] = {}
        for i, k in cluster_of.items():
            members.setdefault(k, []).append(i)
        seen, stack = set(), [start]
        while stack:
            w = stack.pop()
            k = cluster_of.get(w)
            if k == c:
                return True
            key = ("cluster", k) if k is not None else w
            if key in seen:
                continue
            seen.add(key)
            stack.extend(p for m in (members[k] if k is not None else [w]) for p in self.preds[m])
        return False

    def _joinable(self, u: int, v: int) -> bool:
        a, b = self.nodes[u], self.nodes[v]
        return (
            a.device == b.device
            and a.attrs.get("_XlaScope") == b.attrs.get("_XlaScope")
            and self.deadness[u] == self.deadness[v]
        )


def _rewrite(nodes: list[Node], clusters: list[list[int]]) -> list[Node]:
    """Replaces each cluster by its fused node and rewires the rest of the graph."""
    names = {n.name for n in nodes}
    cluster_of: dict[str, int] = {}
    for c, idx in enumerate(clusters):
        for i in idx:
            cluster_of[nodes[i].name] = c
    consumed_outside: set[str] = set()
    for n in nodes:
        mine = cluster_of.get(n.name)
        for src, _ in n.inputs:
            if src in cluster_of and cluster_of[src] != mine:
                consumed_outside.add(src)
    fused_name, output_of = [], {}  # member name -> (fused node name, output index)
    for c, idx in enumerate(clusters):
        name = _unique(f"fused_cluster_{c}", names)
        fused_name.append(name)
        outs = [nodes[i].name for i in idx if nodes[i].name in consumed_outside]
        if not outs and not any(nodes[i].op in fused_codegen.ASSIGN_OPS for i in idx):
            outs = [nodes[idx[-1]].name]  # an output to wait for (a control consumer's)
        for k, member in enumerate(outs):
            output_of[member] = (name, k)

    def data(src, port):
        return output_of.get(src, (src, port))

    def control(names_):
        mapped = (fused_name[cluster_of[c]] if c in cluster_of else c for c in names_)
        return tuple(dict.fromkeys(mapped))

    fused_at = {idx[-1]: c for c, idx in enumerate(clusters)}
    out = []
    for i, n in enumerate(nodes):
        if n.name not in cluster_of:
            inputs = tuple(data(s, p) for s, p in n.inputs)
            ctrl = control(n.control)
            if inputs != n.inputs or ctrl != n.control:
                n = n.replace(inputs=inputs, control=ctrl)
            out.append(n)
        elif i in fused_at:
            c = fused_at[i]
            out.append(_fused_node(nodes, clusters[c], fused_name[c], output_of, data, control))
    return out


def _fused_node(nodes, idx, name, output_of, data, control) -> Node:
    """The fused node of one cluster, its body the members in TF's function-body form."""
    members = [nodes[i] for i in idx]
    inside = {m.name for m in members}
    args: dict[tuple, int] = {}
    arg_types = []
    body = GraphDef()
    member_defs = []
    for m in members:
        nd = m.to_node_def()
        nd.device = ""
        del nd.input[:]
        for (src, port), t in zip(m.inputs, m.input_types):
            if src in inside:
                nd.input.append(src)
                continue
            key = data(src, port)
            if key not in args:
                args[key] = len(args)
                arg_types.append(t if t.is_ref_dtype else t.base_dtype)  # a variable to update
            nd.input.append(f"_fused_arg_{args[key]}")
        member_defs.append(nd)
    for key, i in args.items():
        arg = make_node(f"_fused_arg_{i}", "_Arg", attrs={"T": arg_types[i], "index": i})
        body.node.append(arg.to_node_def())
    body.node.extend(member_defs)
    outputs = sorted((k, m) for m, (f, k) in output_of.items() if f == name)
    out_types = []
    for k, member in outputs:
        t = next(m for m in members if m.name == member).output_types[0]
        out_types.append(t)
        ret = make_node(f"_fused_retval_{k}", "_Retval", [(member, 0)], attrs={"T": t, "index": k})
        body.node.append(ret.to_node_def())
    ctrl = control(c for m in members for c in m.control if c not in inside)
    return make_node(
        name,
        "_FusedElementwise",
        inputs=list(args),
        control=ctrl,
        device=members[0].device,
        attrs={"Tin": arg_types, "Tout": out_types, "body": body.SerializeToString()},
    )


def _unique(name: str, names: set) -> str:
    candidate, k = name, 0
    while candidate in names:
        k += 1
        candidate = f"{name}_{k}"
    names.add(candidate)
    return candidate

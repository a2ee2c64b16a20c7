"""A fixed schedule as Python source (whitepaper §3.1, §4.4): one function per plan that calls
the kernels in order, with values in local variables, and runs each loop as a `while`.

The dispatch loop (executor.py) pays for pending counts, a ready queue and input slots on
every node; a step whose order is known in advance (schedule.py, loop_blocks.py) needs none of
it. Writing that order down as straight-line code, compiled once per plan, leaves per node only
the kernel call: `r3 = add(ctx7, r1, r2)`. Values live in registers (locals) that a block
reuses once a value's last reader has run, or that are cleared then, so buffers die when the
dispatch loop's input slots would drop them (§4.1).

Control flow is resolved in the code, as the executor's frames do it (frames.py): a Switch is
an `if` that leaves DEAD in its untaken output, a node with a dead input does not run and
passes DEAD on (checked only where a dead value can arrive: after a Switch, or in a loop that
a dead Enter starts), a Merge takes its first live input. A loop keeps its loop variables in
locals that each iteration's NextIterations replace; it ends when every NextIteration is dead
and hands each Exit's last live value (DEAD if none) to its parent. Once per iteration it
checks the step's cancellation and deadline. A kernel that needs the step gets a StepContext
with the frame id and iteration number of the node being run.

`line_nodes[i]` names the node of source line i + 1 (CHECK for lines that belong to no node),
so that a failure names its node as on the dispatch loop.
"""

from __future__ import annotations

import functools
import operator
import time

import numpy as np

from flowgraph.core import errors
from flowgraph.core.dead_value import DEAD
from flowgraph.kernels.cpu.array import const as const_kernel
from flowgraph.runtime.frames import frame_id
from flowgraph.runtime.loop_blocks import Block
from flowgraph.runtime.plan import ASYNC, EXIT, FORWARD, MERGE, NEXT, SEND, SWITCH, TRIGGER
from flowgraph.runtime.step import StepContext

CHECK = -1  # a line that belongs to no node: a loop's checks, clearing registers


class Unsupported(Exception):
    """The plan has a node the generated code cannot run (it stays on the dispatch loop)."""


class StepCode:
    """Generates and compiles the step function of `plan`, whose blocks are `root`; an async
    kernel is called as `start(kernel, node id, step, *inputs)`, which returns its outputs."""

    def __init__(self, plan, root: Block, start):
        self.plan, self.items, self.kind = plan, plan.items, plan.kind
        self.lines: list[str] = []
        self.line_nodes: list[int] = []
        self.ns = {"DEAD": DEAD, "INF": float("inf"), "MONO": time.monotonic, "START": start}
        self.ns |= {"CHECK": _check, "MIXED": _mixed, "Ctx": StepContext, "FID": frame_id}
        self.names: dict[int, str] = {}  # id(object) -> its name in self.ns
        self.loc: dict[tuple, str] = {}  # (node id, port) -> the expression naming its value
        self.maybe_dead: dict[tuple, bool] = {}
        self.node_dead: dict[int, str] = {}  # node id -> an expression true when it is dead
        self.index = {item.node.name: item.id for item in plan.items}
        self.blocks = {id(b): i for i, b in enumerate(root.walk())}
        self.control_sources = {self.index[c] for item in self.items for c in item.node.control}
        self.registers = 0  # of the root block
        self.direct: set[int] = set()  # nodes whose kernel's `direct` function is called
        loops = bool(root.children)
        self.emit(0, "def run(step):")
        if loops:
            self.emit(1, "cm = step.cancellation")
            self.emit(1, "deadline = INF if step.deadline is None else step.deadline")
        self.block(root, 1, "step")
        self.emit(1, "return None")
        self.source = source = "\n".join(self.lines)
        code = compile(source, f"<fixed schedule of {plan.device.name}>", "exec")
        exec(code, self.ns)  # noqa: S102  (our own generated source)
        self.run = self.ns["run"]

    # -- emitting ---------------------------------------------------------------------------
    def emit(self, indent: int, line: str, nid: int = CHECK):
        self.lines.append("    " * indent + line)
        self.line_nodes.append(nid)

    def name(self, obj, prefix: str) -> str:
        """A global of the generated code bound to `obj` (one name per object). Globals are
        upper case, locals lower case: registers r, loop state e m i n x it fid ctx, flags d."""
        key = id(obj)
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = f"{prefix}{len(self.names)}"
            self.ns[name] = obj
        return name

    def block(self, b: Block, indent: int, ctx: str):
        """Emits the items of `b` in order; registers by a linear scan over it."""
        prefix = f"r{self.blocks[id(b)]}_"
        uses: dict[tuple, int] = {}
        for item in b.order:
            for key in self._reads(item, b):
                uses[key] = uses.get(key, 0) + 1
        regs: dict[tuple, str] = {}  # values of this block held in a register now
        free: list[str] = []
        top = 0
        for item in b.order:
            reads = self._reads(item, b)
            ins = [self.loc[key] for key in reads]
            released = []
            for key in reads:
                uses[key] -= 1
                if not uses[key] and key in regs:
                    released.append(regs.pop(key))
            free.extend(reversed(released))
            outs = {}
            for key in self._writes(item, b):
                if uses.get(key):
                    if free:
                        reg = free.pop()
                    else:
                        reg, top = f"{prefix}{top}", top + 1
                    outs[key] = regs[key] = reg
            if isinstance(item, Block):
                self.loop(item, indent, ins, outs, b, ctx)
            else:
                self.node(item, indent, ins, outs, b, ctx)
            taken = set()
            for key, reg in outs.items():
                if self.loc.get(key) == reg:
                    taken.add(reg)
                else:  # a constant took its place: the register stays free
                    del regs[key]
                    free.append(reg)
            kill = [reg for reg in released if reg not in taken]
            if kill:
                self.emit(indent, " = ".join(kill) + " = None")
        if b.parent is None:
            self.registers = top

    def _reads(self, item, b: Block) -> list[tuple]:
        if isinstance(item, Block):
            return [src for e in item.enters for src in self._inputs(e)]
        if item in b.merges:
            return []  # a loop Merge reads its loop's variables
        return self._inputs(item)

    def _inputs(self, nid: int) -> list[tuple]:
        return [(self.index[s], port) for s, port in self.items[nid].node.inputs]

    def _writes(self, item, b: Block) -> list[tuple]:
        if isinstance(item, Block):
            return [(x, 0) for x in item.exits]
        if item in b.merges or self.kind[item] in (EXIT, NEXT):
            return []  # the loop's own names (loop variables, NextIterations, Exits)
        return [(item, port) for port in range(self.items[item].num_outputs)]

    def dead_if(self, nid: int, ins: list[str], data: bool = True) -> str:
        """The condition under which node `nid` is dead: a dead input (when `data`) or a dead
        control input; '' when it cannot be."""
        node = self.items[nid].node
        parts = []
        if data:
            keys = self._inputs(nid)
            parts += [f"{x} is DEAD" for x, key in zip(ins, keys) if self.maybe_dead[key]]
        for c in node.control:
            expr = self.node_dead.get(self.index[c])
            if expr:
                parts.append(expr)
        return " or ".join(parts)

    def flag(self, nid: int, cond: str, indent: int) -> str:
        """`cond`, kept in a local when a control edge will ask whether `nid` is dead."""
        if cond and nid in self.control_sources:
            self.emit(indent, f"d{nid} = {cond}", nid)
            self.node_dead[nid] = cond = f"d{nid}"
        return cond

    # -- nodes ------------------------------------------------------------------------------
    def node(self, nid: int, indent: int, ins: list[str], outs: dict, b: Block, ctx: str):
        kind = self.kind[nid]
        item = self.items[nid]
        if nid in b.merges:
            return  # its names were made when the loop started
        if kind == MERGE:
            return self.merge(nid, indent, ins, outs)
        if kind == SWITCH:
            return self.switch(nid, indent, ins, outs)
        keys = [(nid, port) for port in range(item.num_outputs)]
        if kind == TRIGGER:
            return
        if kind in (FORWARD, NEXT, EXIT):
            return self.forward(nid, kind, indent, ins, outs)
        if kind == SEND:  # a dead _Send still runs: it sends the deadness on
            ctrl = self.dead_if(nid, ins, data=False)
            value = f"DEAD if {ctrl} else {ins[0]}" if ctrl else ins[0]
            self.emit(indent, self.call(nid, [value], ctx), nid)
            return
        cond = self.flag(nid, self.dead_if(nid, ins), indent)
        for key in keys:
            self.maybe_dead[key] = bool(cond)
        if item.kind == ASYNC:  # a feed, a queue, a Recv: it may hand the step over
            if cond or b.parent is not None:
                raise Unsupported(item.node.name)
            call = f"START({self.name(item.compute, 'K')}, {nid}, {', '.join(['step', *ins])})"
        elif item.node.op == "Const" and _is_const(item.compute):
            value = self.name(item.compute(), "V")
            if not cond:
                self.loc[keys[0]] = value  # read where needed: no register
            elif keys[0] in outs:
                self.emit(indent, f"{outs[keys[0]]} = DEAD if {cond} else {value}", nid)
                self.loc[keys[0]] = outs[keys[0]]
            return
        else:
            call = self.call(nid, ins, ctx)
        used = [port for port, key in enumerate(keys) if key in outs]
        if not used:
            self.emit(indent, f"if not ({cond}): {call}" if cond else call, nid)
            return
        targets = ", ".join(outs[keys[p]] for p in used)
        if len(keys) > 1:
            call = f"{self.name(operator.itemgetter(*used), 'G')}({call})"
        if cond:
            dead = self.name((DEAD,) * len(used), "Z") if len(used) > 1 else "DEAD"
            call = f"{dead} if {cond} else {call}"
        self.emit(indent, f"{targets} = {call}", nid)
        for p in used:
            self.loc[keys[p]] = outs[keys[p]]

    def forward(self, nid: int, kind: int, indent: int, ins: list[str], outs: dict):
        """Identity, NextIteration, Exit: the value goes on without a kernel call."""
        key = (nid, 0)
        self.maybe_dead[key] = dead = self.maybe_dead[self._inputs(nid)[0]]
        self.flag(nid, self.dead_if(nid, ins), indent)
        ctrl = self.dead_if(nid, ins, data=False)
        value = f"DEAD if {ctrl} else {ins[0]}" if ctrl else ins[0]
        self.maybe_dead[key] = dead or bool(ctrl)
        if kind == EXIT:  # the loop hands its last live value to the parent
            cond = self.dead_if(nid, ins)
            line = f"if not ({cond}): x{nid} = {ins[0]}" if cond else f"x{nid} = {ins[0]}"
            self.emit(indent, line, nid)
            return
        target = f"n{nid}" if kind == NEXT else outs.get(key)
        if target:
            if target != value:
                self.emit(indent, f"{target} = {value}", nid)
            self.loc[key] = target

    def call(self, nid: int, args: list[str], ctx: str) -> str:
        """The kernel call of node `nid`: a bound kernel is called as its function with its
        context first, one call less per node; a kernel that names a `direct` function (one
        that returns what the kernel returns when it succeeds: an element-wise kernel's ufunc)
        is called as that function, and only its failure goes through the kernel
        (`Schedule.run` calls the kernel again on the same inputs, for the kernel's error)."""
        item = self.items[nid]
        compute = item.compute
        if item.step_arg:
            args = [ctx, *args]
        if isinstance(compute, functools.partial) and not compute.keywords:
            direct = getattr(compute.func, "direct", None)
            if direct is not None and not item.step_arg:
                self.direct.add(nid)
                return f"{self.name(direct, 'U')}({', '.join(args)})"
            bound = [self.name(a, "C") for a in compute.args]
            return f"{self.name(compute.func, 'F')}({', '.join(bound + args)})"
        return f"{self.name(compute, 'K')}({', '.join(args)})"

    def switch(self, nid: int, indent: int, ins: list[str], outs: dict):
        data, pred = ins
        cond = self.flag(nid, self.dead_if(nid, ins), indent)
        false, true = outs.get((nid, 0)), outs.get((nid, 1))
        # the taken output first: its register may be the data's own
        on_true = "; ".join(
            x for x in (true and f"{true} = {data}", false and f"{false} = DEAD") if x
        )
        on_false = "; ".join(
            x for x in (false and f"{false} = {data}", true and f"{true} = DEAD") if x
        )
        both = [x for x in (false, true) if x]
        if cond:
            self.emit(indent, f"if {cond}: {' = '.join(both) or '_'} = DEAD", nid)
            self.emit(indent, f"elif {pred}: {on_true or 'pass'}", nid)
        else:
            self.emit(indent, f"if {pred}: {on_true or 'pass'}", nid)
        self.emit(indent, f"else: {on_false or 'pass'}", nid)
        for port, reg in ((0, false), (1, true)):
            self.maybe_dead[(nid, port)] = True
            if reg:
                self.loc[(nid, port)] = reg

    def merge(self, nid: int, indent: int, ins: list[str], outs: dict):
        """A Merge of a conditional: its first live input (and that input's index)."""
        keys = self._inputs(nid)
        live = [k for k in keys if not self.maybe_dead[k]]
        all_dead = " and ".join(f"{x} is DEAD" for x in ins) if not live else ""
        self.flag(nid, all_dead, indent)
        value, index = outs.get((nid, 0)), outs.get((nid, 1))
        word = "if"
        for i, (x, key) in enumerate(zip(ins, keys)):
            copy = value and value != x and f"{value} = {x}"
            sets = [s for s in (copy, index and f"{index} = I{i}") if s]
            self.ns[f"I{i}"] = np.int32(i)
            body = "; ".join(sets) or "pass"
            if not self.maybe_dead[key]:
                self.emit(indent, f"else: {body}" if word == "elif" else body, nid)
                break
            self.emit(indent, f"{word} {x} is not DEAD: {body}", nid)
            word = "elif"
        else:
            both = [x for x in (value, index) if x]
            self.emit(indent, f"else: {' = '.join(both) or '_'} = DEAD", nid)
        for port, reg in ((0, value), (1, index)):
            self.maybe_dead[(nid, port)] = bool(all_dead)
            if reg:
                self.loc[(nid, port)] = reg

    # -- loops ------------------------------------------------------------------------------
    def loop(self, c: Block, indent: int, ins: list[str], outs: dict, parent: Block, ctx: str):
        """Emits loop `c` as one item of its parent: Enters, `while`, Exits."""
        k = f"it{self.blocks[id(c)]}"
        uses_ctx = any(self.items[n].step_arg for n in c.nodes)
        needs_k = uses_ctx or any(self.needs_frame_id(ch) for ch in c.children)
        fid = f"fid{self.blocks[id(c)]}"
        if self.needs_frame_id(c):
            if parent.parent is None:
                self.emit(indent, f"{fid} = {frame_id(0, 0, c.frame)}")
            else:
                pk, pfid = (f"{p}{self.blocks[id(parent)]}" for p in ("it", "fid"))
                self.emit(indent, f"{fid} = FID({pfid}, {pk}, {c.frame!r})")
        at = 0
        carried = []  # names to clear when the loop is done
        for e in c.enters:
            n_in = len(self.items[e].node.inputs)
            e_ins, at = ins[at : at + n_in], at + n_in
            cond = self.dead_if(e, e_ins, data=False)
            value = f"DEAD if {cond} else {e_ins[0]}" if cond else e_ins[0]
            dead = bool(cond) or self.maybe_dead[self._inputs(e)[0]]
            if self.items[e].node.attrs["is_constant"]:
                self.emit(indent, f"e{e} = {value}", e)
                self.loc[(e, 0)], self.maybe_dead[(e, 0)] = f"e{e}", dead
                self.node_dead[e] = f"e{e} is DEAD" if dead else ""
                carried.append(f"e{e}")
                continue
            for m, (enter, _) in c.merges.items():
                if enter == e:
                    self.emit(indent, f"m{m} = {value}", e)
                    self.loc[(m, 0)], self.maybe_dead[(m, 0)] = f"m{m}", dead
                    self.loc[(m, 1)], self.maybe_dead[(m, 1)] = f"i{m}", dead
                    self.node_dead[m] = f"m{m} is DEAD" if dead else ""
                    self._merge_index(m, e, indent)
                    carried.append(f"m{m}")
        for x in c.exits:
            self.emit(indent, f"x{x} = DEAD")
            carried.append(f"x{x}")
        if needs_k:
            self.emit(indent, f"{k} = 0")
        self.emit(indent, "while True:")
        inner = indent + 1
        self.emit(inner, "if MONO() > deadline or cm.is_cancelled: CHECK(step)")
        inner_ctx = ctx
        if uses_ctx:
            inner_ctx = f"ctx{self.blocks[id(c)]}"
            self.emit(inner, f"{inner_ctx} = Ctx(step, {fid}, {k})")
        self.block(c, inner, inner_ctx)
        nexts = [f"n{n}" for n in c.nexts]
        carried += nexts
        if not nexts:
            self.emit(inner, "break")
        else:
            self.emit(inner, f"if {' and '.join(f'{n} is DEAD' for n in nexts)}: break")
            if len(nexts) > 1:
                any_dead = " or ".join(f"{n} is DEAD" for n in nexts)
                self.emit(inner, f"if {any_dead}: MIXED({c.frame!r})")
            for m, (_, n) in c.merges.items():
                self.emit(inner, f"m{m} = n{n}")
                self._merge_index(m, n, inner)
            if needs_k:
                self.emit(inner, f"{k} += 1")
        for x in c.exits:
            reg = outs.get((x, 0))
            if reg:
                self.emit(indent, f"{reg} = x{x}", x)
                self.loc[(x, 0)] = reg
            self.maybe_dead[(x, 0)] = True
            if x in self.control_sources:
                self.emit(indent, f"d{x} = x{x} is DEAD", x)
                self.node_dead[x] = f"d{x}"
        self.emit(indent, " = ".join(carried) + " = None")

    def _merge_index(self, m: int, src: int, indent: int):
        """Sets loop Merge `m`'s index output to the position of input `src`, if it is read."""
        node = self.items[m].node
        if any(port == 1 for dst, _, port in self.plan.out_edges[m]):
            names = [s for s, _ in node.inputs]
            i = names.index(self.items[src].node.name)
            self.ns[f"I{i}"] = np.int32(i)
            self.emit(indent, f"i{m} = I{i}")

    def needs_frame_id(self, b: Block) -> bool:
        """Whether `b` or a loop inside it runs a kernel that takes the step (and its tag)."""
        steps = any(self.items[n].step_arg for n in b.nodes)
        return steps or any(self.needs_frame_id(c) for c in b.children)


def _is_const(compute) -> bool:
    return isinstance(compute, functools.partial) and compute.func is const_kernel


def _check(step):
    """A loop's check, once per iteration: the step was cancelled or its deadline passed."""
    if step.cancelled:
        raise step.cancellation.error
    error = errors.DeadlineExceededError(None, None, "Timed out waiting for the step to finish")
    step.cancel(error)
    raise error


def _mixed(frame: str):
    raise errors.InvalidArgumentError(
        None,
        None,
        f"Loop '{frame}': some NextIteration values are dead and others live in one "
        "iteration; every loop variable must go on or stop together",
    )

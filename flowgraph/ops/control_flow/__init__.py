"""Control flow (whitepaper §4.4): conditionals and loops built from Switch, Merge, Enter,
Exit and NextIteration, which the executor runs with frames and tagged iterations."""

from flowgraph.ops.control_flow.cond import case, cond
from flowgraph.ops.control_flow.functional import foldl, foldr, map_fn, scan
from flowgraph.ops.control_flow.while_loop import while_loop
from flowgraph.ops.tensor_array import TensorArray

__all__ = ["TensorArray", "case", "cond", "foldl", "foldr", "map_fn", "scan", "while_loop"]

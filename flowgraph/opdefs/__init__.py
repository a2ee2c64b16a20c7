"""The op library's declarations (OpDefs), one module per row of the whitepaper's Table 1.

They are plain data shared by the client (graph construction validates against them) and the
runtime (output counts, types, ref-ness), which is why they live apart from the Python wrappers
in `flowgraph/ops/`: the runtime must not import client code (DESIGN.md, one-way imports).
Importing this package registers every op.
"""

from flowgraph.opdefs import array, control_flow, math, sendrecv, state  # noqa: F401
from flowgraph.opdefs import training  # noqa: F401
from flowgraph.opdefs import random  # noqa: F401
from flowgraph.opdefs import nn, nn_conv  # noqa: F401
from flowgraph.opdefs import grad_support  # noqa: F401
from flowgraph.opdefs import linalg  # noqa: F401
from flowgraph.opdefs import logging  # noqa: F401
from flowgraph.opdefs import tensor_array  # noqa: F401
from flowgraph.opdefs import summary  # noqa: F401
from flowgraph.opdefs import script_ops  # noqa: F401
from flowgraph.opdefs import segment  # noqa: F401
from flowgraph.opdefs import lookup  # noqa: F401
from flowgraph.opdefs import io  # noqa: F401
from flowgraph.opdefs import data_flow  # noqa: F401
from flowgraph.opdefs import readers  # noqa: F401
from flowgraph.opdefs import parsing  # noqa: F401
from flowgraph.opdefs import string_ops  # noqa: F401
from flowgraph.opdefs import image  # noqa: F401
from flowgraph.opdefs import sparse  # noqa: F401

"""The op library's declarations (OpDefs), one module per row of the whitepaper's Table 1.

They are plain data shared by the client (graph construction validates against them) and the
runtime (output counts, types, ref-ness), which is why they live apart from the Python wrappers
in `flowgraph/ops/`: the runtime must not import client code (DESIGN.md, one-way imports).
Importing this package registers every op.
"""

from flowgraph.opdefs import (  # noqa: F401
    array,
    array_index,
    array_join,
    array_space,
    beam_search,
    control_flow,
    data_flow,
    grad_support,
    image,
    io,
    linalg,
    logging,
    lookup,
    math,
    nn,
    nn_conv,
    parsing,
    random,
    readers,
    script_ops,
    segment,
    sendrecv,
    sparse,
    variables,
    string_ops,
    summary,
    tensor_array,
    training,
)
from flowgraph.opdefs import functional  # noqa: F401
from flowgraph.opdefs import dataset_ops  # noqa: F401
from flowgraph.opdefs import special_math  # noqa: F401
from flowgraph.opdefs import sets  # noqa: F401
from flowgraph.opdefs import image_color  # noqa: F401
from flowgraph.opdefs import image_boxes  # noqa: F401
from flowgraph.opdefs import fusion  # noqa: F401
from flowgraph.opdefs import linalg_decomp  # noqa: F401
from flowgraph.opdefs import array_nd  # noqa: F401
from flowgraph.opdefs import image_resample  # noqa: F401
from flowgraph.opdefs import nn_conv3d  # noqa: F401
from flowgraph.opdefs import weight_updates  # noqa: F401

"""Symbolic gradients (whitepaper §4.1): tf.gradients, tf.hessians and the gradient registry.

Importing this package registers the gradient function of every differentiable op; the
per-row modules (math, reduction, linalg, array, state) mirror flowgraph/ops/.
"""

from flowgraph.framework.indexed_slices import IndexedSlices, IndexedSlicesValue
from flowgraph.gradients import array, linalg, math, reduction, variables  # noqa: F401  (registers)
from flowgraph.gradients.custom_gradient import custom_gradient
from flowgraph.gradients.aggregation import AggregationMethod
from flowgraph.gradients.impl import UnconnectedGradients, gradients, hessians
from flowgraph.gradients.registry import RegisterGradient, not_differentiable

NotDifferentiable = not_differentiable  # TF1 exports both names for this one function
NoGradient = not_differentiable
no_gradient = not_differentiable  # the name TF 1.15 recommends

__all__ = [
    "AggregationMethod",
    "IndexedSlices",
    "IndexedSlicesValue",
    "NoGradient",
    "NotDifferentiable",
    "RegisterGradient",
    "UnconnectedGradients",
    "custom_gradient",
    "gradients",
    "hessians",
    "no_gradient",
]
from flowgraph.gradients import (  # noqa: F401  (registers §4.4's gradients)
    control_flow,
    image,
    nn,
    nn_conv,
    segment,
    sparse,
    tensor_array,
)
from flowgraph.gradients import functional  # noqa: F401  (function calls)
from flowgraph.gradients import special_math  # noqa: F401
from flowgraph.gradients import linalg_decomp  # noqa: F401
from flowgraph.gradients import array_nd  # noqa: F401
from flowgraph.gradients import nn_conv3d  # noqa: F401
from flowgraph.gradients import array_space  # noqa: F401

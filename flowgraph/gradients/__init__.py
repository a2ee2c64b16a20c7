"""Symbolic gradients (whitepaper §4.1): tf.gradients, tf.hessians and the gradient registry.

Importing this package registers the gradient function of every differentiable op; the
per-row modules (math, reduction, linalg, array, state) mirror flowgraph/ops/.
"""

from flowgraph.framework.indexed_slices import IndexedSlices, IndexedSlicesValue
from flowgraph.gradients import array, linalg, math, reduction, state  # noqa: F401  (registers)
from flowgraph.gradients.impl import AggregationMethod, UnconnectedGradients, gradients, hessians
from flowgraph.gradients.registry import RegisterGradient, not_differentiable

NotDifferentiable = not_differentiable  # TF1 exports both names for this one function
NoGradient = not_differentiable

__all__ = [
    "gradients",
    "hessians",
    "RegisterGradient",
    "NotDifferentiable",
    "NoGradient",
    "AggregationMethod",
    "UnconnectedGradients",
    "IndexedSlices",
    "IndexedSlicesValue",
]
from flowgraph.gradients import nn, nn_conv  # noqa: F401  (registers the NN row's gradients)
from flowgraph.gradients import control_flow, tensor_array  # noqa: F401  (registers §4.4's gradients)
from flowgraph.gradients import sparse  # noqa: F401  (registers the sparse ops' gradients)
from flowgraph.gradients import segment  # noqa: F401  (segment ops, DynamicPartition, Einsum)
from flowgraph.gradients import image  # noqa: F401  (resize ops)

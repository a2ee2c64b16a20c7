"""tf.layers: TF1's object and functional layers, each owning variables in its variable scope."""

from flowgraph.layers.base import Layer
from flowgraph.layers.convolutional import (
    AveragePooling2D,
    Conv2D,
    MaxPooling2D,
    average_pooling2d,
    conv2d,
    max_pooling2d,
)
from flowgraph.layers.convolutional3d import (
    AveragePooling3D,
    Conv3D,
    Conv3DTranspose,
    MaxPooling3D,
    average_pooling3d,
    conv3d,
    conv3d_transpose,
    max_pooling3d,
)
from flowgraph.layers.convolutional_variants import (
    AveragePooling1D,
    Conv1D,
    Conv2DTranspose,
    MaxPooling1D,
    SeparableConv1D,
    SeparableConv2D,
    average_pooling1d,
    conv1d,
    conv2d_transpose,
    max_pooling1d,
    separable_conv1d,
    separable_conv2d,
)
from flowgraph.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from flowgraph.layers.normalization import BatchNormalization, batch_normalization

__all__ = [
    "AveragePooling2D",
    "BatchNormalization",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPooling2D",
    "average_pooling2d",
    "batch_normalization",
    "conv2d",
    "dense",
    "dropout",
    "flatten",
    "max_pooling2d",
]
__all__ += [
    "AveragePooling1D",
    "Conv1D",
    "Conv2DTranspose",
    "MaxPooling1D",
    "SeparableConv1D",
    "SeparableConv2D",
    "average_pooling1d",
    "conv1d",
    "conv2d_transpose",
    "max_pooling1d",
    "separable_conv1d",
    "separable_conv2d",
]
__all__ += [
    "AveragePooling3D",
    "Conv3D",
    "Conv3DTranspose",
    "MaxPooling3D",
    "average_pooling3d",
    "conv3d",
    "conv3d_transpose",
    "max_pooling3d",
]

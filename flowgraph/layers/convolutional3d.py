"""3-D convolution and pooling layers of tf.layers (TF 1.15): Conv3D, Conv3DTranspose,
MaxPooling3D, AveragePooling3D and their functional forms, over [batch, depth, height, width,
channels] ('channels_last') or [batch, channels, depth, height, width] ('channels_first').

They are the 2-D layers' rank-generic bases with `rank = 3`: the same arguments with triples
for `kernel_size`, `strides`, `dilation_rate` and `pool_size`, and the same variables
(`kernel` [kd, kh, kw, in, filters], `bias`).
"""

from __future__ import annotations

from flowgraph.layers.base import functional
from flowgraph.layers.convolutional import _Conv, _Pooling, functional_pool
from flowgraph.layers.convolutional_variants import _ConvTranspose
from flowgraph.ops import nn_conv3d

__all__ = [
    "AveragePooling3D",
    "Conv3D",
    "Conv3DTranspose",
    "MaxPooling3D",
    "average_pooling3d",
    "conv3d",
    "conv3d_transpose",
    "max_pooling3d",
]


class Conv3D(_Conv):
    """3-D convolution: outputs = activation(conv3d(inputs, kernel) + bias)."""

    rank = 3
    conv_fn = staticmethod(nn_conv3d.conv3d)


class Conv3DTranspose(_ConvTranspose):
    """Transposed 3-D convolution: kernel [kd, kh, kw, filters, in_channels]; each spatial dim
    grows by its stride (plus the kernel overhang with 'valid' padding)."""

    rank = 3
    transpose_fn = staticmethod(nn_conv3d.conv3d_transpose)


class MaxPooling3D(_Pooling):
    """Max over `pool_size` windows every `strides` cells."""

    rank = 3
    pool_module = nn_conv3d
    pool_fn_name = "max_pool3d"


class AveragePooling3D(_Pooling):
    """Mean over `pool_size` windows ('same' padding averages only the in-bounds cells)."""

    rank = 3
    pool_module = nn_conv3d
    pool_fn_name = "avg_pool3d"


conv3d = functional(
    Conv3D,
    "Functional Conv3D. Example: h = tf.layers.conv3d(clips, 16, 3, padding='same', "
    "activation=tf.nn.relu)",
)
conv3d_transpose = functional(Conv3DTranspose, "Functional Conv3DTranspose.")
max_pooling3d = functional_pool(
    MaxPooling3D, "Functional MaxPooling3D. Example: h = tf.layers.max_pooling3d(h, 2, 2)"
)
average_pooling3d = functional_pool(AveragePooling3D, "Functional AveragePooling3D.")

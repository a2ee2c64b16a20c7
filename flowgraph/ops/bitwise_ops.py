"""tf.bitwise: bitwise logic and shifts of integer tensors (TensorFlow's bitwise_ops). Shift
amounts are clamped to [0, bits - 1] as TensorFlow's kernels do; right shifts of signed
integers are arithmetic.

Example: tf.bitwise.bitwise_and(tf.constant([12], tf.uint8), 10)  # [8]
"""

from __future__ import annotations

from flowgraph.ops.math import _binary, _unary

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]

bitwise_and = _binary("BitwiseAnd", "bitwise_and", "x & y element-wise.")
bitwise_or = _binary("BitwiseOr", "bitwise_or", "x | y element-wise.")
bitwise_xor = _binary("BitwiseXor", "bitwise_xor", "x ^ y element-wise.")
left_shift = _binary("LeftShift", "left_shift", "x << y element-wise.")
right_shift = _binary("RightShift", "right_shift", "x >> y element-wise.")
invert = _unary("Invert", "invert", "~x: each bit flipped.")

"""tf.contrib.compiler.jit: TF1's name for `tf.xla.experimental.jit_scope`."""

from flowgraph.framework.jit import jit_scope as experimental_jit_scope

__all__ = ["experimental_jit_scope"]

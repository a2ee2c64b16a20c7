"""tf.contrib.compiler: `jit.experimental_jit_scope` (compiled fusion, whitepaper §10)."""

from flowgraph.contrib.compiler import jit

__all__ = ["jit"]

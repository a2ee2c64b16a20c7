"""The op wrappers (whitepaper Table 1), one module per row. Importing the package installs
Tensor's Python operators (`+`, `@`, `<`, ...), which call the wrappers."""

from flowgraph.ops import tensor_operators  # noqa: F401

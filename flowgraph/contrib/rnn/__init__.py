"""tf.contrib.rnn: aliases of tf.nn.rnn_cell and the static RNNs."""

from flowgraph.ops.rnn import static_bidirectional_rnn, static_rnn
from flowgraph.ops.rnn_cell import (
    BasicLSTMCell,
    BasicRNNCell,
    DropoutWrapper,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    RNNCell,
)

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
    "static_bidirectional_rnn",
    "static_rnn",
]

"""tf.contrib: the few contrib APIs TF1 programs commonly use (layers initializers and
regularizers, rnn aliases). Everything here forwards to the core implementation."""

from flowgraph.contrib import (
    cluster_resolver,
    data,
    layers,
    lookup,
    rnn,
    seq2seq,
    staging,
    training,
    util,
)

__all__ = ["layers", "rnn", "staging", "util"]
__all__ += ["lookup"]
__all__ += ["seq2seq"]
__all__ += ["data"]
__all__ += ["training"]
__all__ += ["cluster_resolver"]

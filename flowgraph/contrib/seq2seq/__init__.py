"""tf.contrib.seq2seq: sequence-to-sequence decoding (TF1's contrib package).

loss.py (sequence_loss), helper.py (how each step picks its next input), decoder.py (the decode
while loop), basic_decoder.py, attention_wrapper.py (attention mechanisms and the cell that
applies them), beam_search_decoder.py (beam search over a cell, with GatherTree backtracking).
"""

from flowgraph.contrib.seq2seq.attention_mechanism import (
    AttentionMechanism,
    BahdanauAttention,
    BahdanauMonotonicAttention,
    LuongAttention,
    LuongMonotonicAttention,
    hardmax,
    monotonic_attention,
    safe_cumprod,
)
from flowgraph.contrib.seq2seq.attention_wrapper import AttentionWrapper, AttentionWrapperState
from flowgraph.contrib.seq2seq.basic_decoder import BasicDecoder, BasicDecoderOutput
from flowgraph.contrib.seq2seq.beam_search_decoder import (
    BeamSearchDecoder,
    FinalBeamSearchDecoderOutput,
)
from flowgraph.contrib.seq2seq.beam_search_ops import (
    gather_tree,
    gather_tree_from_array,
    tile_batch,
)
from flowgraph.contrib.seq2seq.beam_search_step import (
    BeamSearchDecoderOutput,
    BeamSearchDecoderState,
)
from flowgraph.contrib.seq2seq.decoder import Decoder, dynamic_decode
from flowgraph.contrib.seq2seq.helper import (
    CustomHelper,
    GreedyEmbeddingHelper,
    Helper,
    InferenceHelper,
    SampleEmbeddingHelper,
    ScheduledEmbeddingTrainingHelper,
    ScheduledOutputTrainingHelper,
    TrainingHelper,
)
from flowgraph.contrib.seq2seq.loss import SequenceLoss, sequence_loss

__all__ = [
    "AttentionMechanism",
    "AttentionWrapper",
    "AttentionWrapperState",
    "BahdanauAttention",
    "BahdanauMonotonicAttention",
    "BasicDecoder",
    "BasicDecoderOutput",
    "BeamSearchDecoder",
    "BeamSearchDecoderOutput",
    "BeamSearchDecoderState",
    "CustomHelper",
    "Decoder",
    "FinalBeamSearchDecoderOutput",
    "GreedyEmbeddingHelper",
    "Helper",
    "InferenceHelper",
    "LuongAttention",
    "LuongMonotonicAttention",
    "SampleEmbeddingHelper",
    "ScheduledEmbeddingTrainingHelper",
    "ScheduledOutputTrainingHelper",
    "SequenceLoss",
    "TrainingHelper",
    "dynamic_decode",
    "gather_tree",
    "gather_tree_from_array",
    "hardmax",
    "monotonic_attention",
    "safe_cumprod",
    "sequence_loss",
    "tile_batch",
]

# TF 1.15's Keras-layer variants of the decoders, not built here (they need tf.keras layers).
_NOT_BUILT = ("BaseDecoder", "BasicDecoderV2", "BeamSearchDecoderV2")


def __getattr__(name):
    if name in _NOT_BUILT:
        raise NotImplementedError(
            f"tf.contrib.seq2seq.{name} (the Keras-layer decoder API) is not implemented in "
            "flowgraph; use the TF1 classes (BasicDecoder, BeamSearchDecoder, dynamic_decode)"
        )
    raise AttributeError(f"module 'tf.contrib.seq2seq' has no attribute '{name}'")

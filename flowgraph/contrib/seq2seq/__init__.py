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
from flowgraph.contrib.seq2seq.loss import sequence_loss

__all__ = [
    "AttentionMechanism",
    "AttentionWrapper",
    "AttentionWrapperState",
    "BahdanauAttention",
    "BahdanauMonotonicAttention",
    "BasicDecoder",
    "BasicDecoderOutput",
    "CustomHelper",
    "Decoder",
    "GreedyEmbeddingHelper",
    "Helper",
    "InferenceHelper",
    "LuongAttention",
    "LuongMonotonicAttention",
    "SampleEmbeddingHelper",
    "ScheduledEmbeddingTrainingHelper",
    "ScheduledOutputTrainingHelper",
    "TrainingHelper",
    "dynamic_decode",
    "hardmax",
    "monotonic_attention",
    "safe_cumprod",
    "sequence_loss",
]

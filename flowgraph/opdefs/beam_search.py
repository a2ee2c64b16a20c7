"""OpDef of GatherTree (TF1's contrib/seq2seq beam_search_ops.cc): backtracking beam search.

Given each step's chosen ids and the beam each came from (parent ids), both
[max_time, batch, beam], GatherTree follows the parents from each beam's last step back to the
first and returns the full id sequence of every final beam; after a beam's first `end_token`
(and past max_sequence_lengths[batch]) the ids are `end_token`.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op


def _gather_tree_shape(ctx):
    step_ids, parent_ids, lengths, end_token = ctx.input_shapes
    step_ids = step_ids.with_rank(3).merge_with(parent_ids.with_rank(3))
    lengths.with_rank(1)[0].merge_with(step_ids[1])
    end_token.with_rank(0)
    return step_ids


register_op(
    OpDef(
        "GatherTree",
        inputs=["step_ids: T", "parent_ids: T", "max_sequence_lengths: int32", "end_token: T"],
        outputs=["beams: T"],
        attrs=["T: {int32}"],
        shape_fn=_gather_tree_shape,
    )
)

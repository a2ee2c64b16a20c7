"""CPU kernel of GatherTree (see flowgraph/opdefs/beam_search.py). The backtracking runs one
step at a time from the last, for all (batch, beam) pairs at once: each step gathers the ids
of the current parents, then moves to their parents."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


def _invalid(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _check_shapes(step_ids, parent_ids, lengths, end_token):
    if step_ids.ndim != 3:
        raise _invalid(f"step_ids must be a 3-tensor, saw shape: {list(step_ids.shape)}")
    if parent_ids.shape != step_ids.shape:
        raise _invalid(
            "step_ids.shape must match parent_ids.shape.  but shapes are: "
            f"{list(step_ids.shape)} and {list(parent_ids.shape)}"
        )
    if lengths.ndim != 1 or lengths.shape[0] != step_ids.shape[1]:
        raise _invalid(
            "max_sequence_lengths must be a vector of length batch_size "
            f"({step_ids.shape[1]}), saw shape: {list(lengths.shape)}"
        )
    if np.ndim(end_token) != 0:
        raise _invalid(f"end_token must be a scalar, saw shape: {list(np.shape(end_token))}")


@register_kernel("GatherTree")
def gather_tree(ctx, step_ids, parent_ids, max_sequence_lengths, end_token):
    _check_shapes(step_ids, parent_ids, max_sequence_lengths, end_token)
    max_time, batch, beam_width = step_ids.shape
    beams = np.full(step_ids.shape, end_token, dtype=step_ids.dtype)
    if step_ids.size == 0:
        return beams
    seq_len = np.minimum(max_sequence_lengths.astype(np.int64), max_time)  # [batch]
    batch_idx = np.arange(batch)[:, None]
    parent = np.broadcast_to(np.arange(beam_width), (batch, beam_width)).copy()
    # Walking back from t = max_time - 1, a batch's walk starts at its last step seq_len - 1
    # (its own beam ids) and then follows the parents.
    for t in range(max_time - 1, -1, -1):
        active = (t < seq_len)[:, None]  # [batch, 1]
        started = (t < seq_len - 1)[:, None]  # parents of step t + 1 are in effect
        bad = active & started & ((parent < 0) | (parent >= beam_width))
        if bad.any():
            b, k = np.argwhere(bad)[0]
            raise _invalid(
                f"Saw invalid parent id {int(parent[b, k])} at (batch, beam, time) = "
                f"({b}, {k}, {t})"
            )
        here = np.where(started, parent, np.arange(beam_width))
        beams[t] = np.where(active, step_ids[t][batch_idx, here], end_token)
        parent = np.where(active, parent_ids[t][batch_idx, here], parent)
    # After a beam's first end_token everything is end_token (user-fed broken trajectories).
    is_end = beams == end_token
    seen_end = np.cumsum(is_end, axis=0) - is_end > 0
    in_range = np.arange(max_time)[:, None, None] < seq_len[None, :, None]
    return np.where(seen_end & in_range, end_token, beams)

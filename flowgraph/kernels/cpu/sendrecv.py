"""_Send and _Recv (§3.2.2): the only kernels that cross a device or client boundary.

The rendezvous key's prefix is built once per node (it depends only on attrs); the frame and
iteration come per execution from the kernel's own step context (`step.frame_id`,
`step.iter_id`: the tag of the node being run), so that loop iterations never collide and
partitions running the same loop concurrently never see each other's tags."""

from __future__ import annotations

import numpy as np

from flowgraph.core.dead_value import DEAD
from flowgraph.core.rendezvous_keys import key_prefix, with_frame
from flowgraph.kernels.base import register_kernel


def _key(ctx, step) -> str:
    prefix = ctx.state
    if prefix is None:
        a = ctx.attrs
        prefix = ctx.state = key_prefix(
            a["send_device"], a["send_device_incarnation"], a["recv_device"], a["tensor_name"]
        )
    return with_frame(prefix, step.frame_id, step.iter_id)


@register_kernel("_Send", step=True)
def send(ctx, step, x):
    step.rendezvous.send(_key(ctx, step), x, x is DEAD)


@register_kernel("_Recv", async_=True)
def recv(ctx, step, done):
    def on_value(error, value, is_dead):
        if error is not None:
            done(None, error)
        else:
            done(DEAD if is_dead else value)

    step.rendezvous.recv_async(_key(ctx, step), on_value)


@register_kernel("_CopyFromGpuToHost")
@register_kernel("_CopyFromHostToGpu")
def swap_copy(ctx, x):
    """The memory optimizer's swap-out and swap-in: a fresh buffer in the memory it runs in."""
    return np.array(x, copy=True)

"""_Send and _Recv (§3.2.2): the only kernels that cross a device or client boundary.

The rendezvous key is built once per node (it depends only on attrs), with the frame and
iteration appended per execution so that loop iterations never collide."""

from __future__ import annotations

from flowgraph.kernels.base import register_kernel
from flowgraph.runtime.rendezvous import DEAD, rendezvous_key


def _key(ctx, step) -> str:
    key = ctx.state
    if key is None:
        a = ctx.attrs
        key = ctx.state = rendezvous_key(
            a["send_device"],
            a["send_device_incarnation"],
            a["recv_device"],
            a["tensor_name"],
            (0, 0),
        ).rpartition(";")[0]
    frame, it = step.frame_iter
    return f"{key};{frame}:{it}"


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

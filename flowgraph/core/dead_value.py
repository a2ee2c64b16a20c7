"""The value of a dead tensor (whitepaper §4.4): the untaken output of a Switch, and all that
depends on it. The executor propagates it; _Send/_Recv carry it across devices, so deadness
crosses partitions. It lives in core/ because kernels (Switch, Merge, Send) and the runtime
both name it."""

from __future__ import annotations


class _Dead:
    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()

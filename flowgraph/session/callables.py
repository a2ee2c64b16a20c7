"""Callables (TF's Session.make_callable over MasterService.MakeCallable/RunCallable/
ReleaseCallable): the master prunes, places, partitions and registers a callable's signature
once, and each call is one RunCallable carrying only the feed values in order. The same code
runs against the local, an in-process and a gRPC master; with a master of this process, a
call whose plan runs on the master's own worker alone skips the requests (a LocalRun:
distributed/local_run.py).

A callable is released (ReleaseCallable) when the Python object is collected, unless its
session is closed by then: closing a session drops its callables on the master.
"""

from __future__ import annotations

import contextlib
import weakref

from flowgraph.core import errors
from flowgraph.core.device_spec import parse
from flowgraph.distributed import messages as m


class MasterCallable:
    """One MakeCallable handle of `session` for `options` (a CallableOptions proto)."""

    def __init__(self, session, options):
        _check_devices(options)
        self._session = session
        req = m.MakeCallableRequest(session._handle, m.CallableOptions.from_proto(options))
        try:
            self.handle = session._master.make_callable(req).handle
            master = session._inproc_master
            self._local = (
                master.local_callable(m.RunCallableRequest(session._handle, self.handle, ()))
                if master is not None
                else None
            )
        except errors.OpError as e:
            raise session._decorate(e) from e.__cause__
        weakref.finalize(self, _release, session, self.handle)

    def run(self, feed_values: list, run_metadata=None) -> list:
        """The fetched values, in CallableOptions.fetch order."""
        session = self._session
        if self._local is not None:
            out = session._run_local(self._local, feed_values)
            if out is not None:
                return out
        req = m.RunCallableRequest(session._handle, self.handle, feed_values)
        try:
            resp = session._master.run_callable(req)
        except errors.OpError as e:
            raise session._decorate(e) from e.__cause__
        if run_metadata is not None and resp.metadata is not None:
            run_metadata.MergeFrom(resp.metadata)
        return resp.fetch


def _release(session, handle: int) -> None:
    if session._closed:
        return  # the master dropped the session's callables with it
    with contextlib.suppress(Exception):  # interpreter shutdown, a master gone: nothing to free
        session._master.release_callable(m.ReleaseCallableRequest(session._handle, handle))


def _check_devices(options) -> None:
    """Values fed to and fetched from a callable are host (CPU) memory here: a GPU in
    feed_devices/fetch_devices is refused by name rather than ignored."""
    for field in ("feed_devices", "fetch_devices"):
        for tensor, device in getattr(options, field).items():
            if device and parse(device).device_type not in (None, "CPU"):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"CallableOptions.{field}[{tensor!r}] = {device!r}: only host (CPU) "
                    "memory is supported for values fed to or fetched from a callable",
                )

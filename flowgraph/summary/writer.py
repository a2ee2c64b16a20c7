"""FileWriter: Events appended to a TensorBoard event file (whitepaper §9.1, FORMATS.md §1).

The file is named `events.out.tfevents.<unix time>.<hostname>[suffix]` (TensorBoard only reads
files whose name contains `tfevents`) and starts with `Event{file_version: "brain.Event:2"}`.
Events pass through a queue of `max_queue` entries to one writer thread, so `add_summary` in a
training loop never waits on the disk; the thread flushes at least every `flush_secs` seconds,
and `flush()`/`close()` return only once every queued event is on disk.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from typing import ClassVar

from flowgraph.core.protos import (
    Event,
    GraphDef,
    MetaGraphDef,
    SessionLog,
    Summary,
    TaggedRunMetadata,
)
from flowgraph.framework.graph import get_default_graph
from flowgraph.summary.records import encode_record

__all__ = ["FileWriter", "FileWriterCache"]

FILE_VERSION = "brain.Event:2"
_log = logging.getLogger(__name__)


def _event_file_path(logdir: str, filename_suffix: str) -> str:
    """A new event file's path: TF1's name, plus `.<pid>.<n>` only if that name is taken (two
    writers opened in the same second would otherwise clobber each other, as in TF1)."""
    base = os.path.join(
        logdir, f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}"
    )
    path = base + filename_suffix
    n = 0
    while os.path.exists(path):
        n += 1
        path = f"{base}.{os.getpid()}.{n}{filename_suffix}"
    return path


class _EventFile:
    """The open event file and the thread that drains the queue into it.

    `queue` holds serialized records, a `_FLUSH` request (a threading.Event to set when done) or
    `_STOP`. Only the writer thread touches `file`.
    """

    _STOP = object()

    def __init__(self, path: str, max_queue: int, flush_secs: float):
        self.path = path
        self.file = open(path, "wb")  # noqa: SIM115 (closed by the writer thread)
        self.queue: queue.Queue = queue.Queue(max(1, max_queue))
        self.flush_secs = flush_secs
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="EventFileWriter", daemon=True)
        self.thread.start()

    def _run(self):
        next_flush = time.monotonic() + self.flush_secs
        while True:
            try:
                item = self.queue.get(timeout=max(0.0, next_flush - time.monotonic()))
            except queue.Empty:
                item = None
            try:
                if item is self._STOP:
                    self.file.close()
                    return
                if isinstance(item, bytes):
                    self.file.write(item)
                elif isinstance(item, threading.Event):
                    self.file.flush()
                    item.set()
                if time.monotonic() >= next_flush:
                    self.file.flush()
                    next_flush = time.monotonic() + self.flush_secs
            except OSError as e:  # reported to the client on its next call
                self.error = e
                if isinstance(item, threading.Event):
                    item.set()

    def put(self, record: bytes):
        self._raise_error()
        self.queue.put(record)

    def flush(self):
        done = threading.Event()
        self.queue.put(done)
        done.wait()
        self._raise_error()

    def close(self):
        self.flush()
        self.queue.put(self._STOP)
        self.thread.join()

    def _raise_error(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise OSError(f"writing event file {self.path} failed: {error}") from error


class FileWriter:
    """Writes Summary protos, graphs and run metadata to an event file in `logdir`.

    Args:
      logdir: directory for the event file (created if missing).
      graph: a Graph (or GraphDef) written as the first graph_def and meta_graph_def events.
      max_queue: events buffered before `add_*` calls wait for the writer thread.
      flush_secs: the longest time an event stays unflushed.
      graph_def: deprecated; a GraphDef to write (use `graph`).
      filename_suffix: appended to the event file's name.
      session: unsupported (it selects TF's in-graph summary writer); passing one raises.

    Example:
      writer = tf.summary.FileWriter("logs/run1", sess.graph)
      writer.add_summary(sess.run(merged), global_step=step)
      writer.close()
    """

    def __init__(
        self,
        logdir,
        graph=None,
        max_queue=10,
        flush_secs=120,
        graph_def=None,
        filename_suffix=None,
        session=None,
    ):
        if session is not None:
            raise NotImplementedError(
                "FileWriter(session=...) selects TF's in-graph summary writer ops, which flowgraph "
                "does not provide; write with FileWriter(logdir) instead."
            )
        self._logdir = os.fspath(logdir)
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._suffix = filename_suffix or ""
        self._seen_summary_tags: set[str] = set()
        self._run_metadata_tags: set[str] = set()
        self._graph_added = False
        self._meta_graph_added = False
        self._file: _EventFile | None = None
        self.reopen()
        if graph is not None or graph_def is not None:
            try:
                self.add_graph(graph, graph_def=graph_def)
                self.add_meta_graph(MetaGraphDef(graph_def=self._graph_def_of(graph, graph_def)))
            except BaseException:  # a bad graph: no writer thread or open file is left behind
                self.close()
                raise

    # -- the file ---------------------------------------------------------------------------------
    def get_logdir(self) -> str:
        """The directory the event file is in."""
        return self._logdir

    def reopen(self):
        """Opens a new event file after `close()`; a no-op while open."""
        if self._file is not None:
            return
        os.makedirs(self._logdir, exist_ok=True)
        path = _event_file_path(self._logdir, self._suffix)
        self._file = _EventFile(path, self._max_queue, self._flush_secs)
        self._file.put(
            encode_record(
                Event(wall_time=time.time(), file_version=FILE_VERSION).SerializeToString()
            )
        )

    def flush(self):
        """Returns once every event added so far is written to disk."""
        if self._file is not None:
            self._file.flush()

    def close(self):
        """Flushes and closes the file; later `add_*` calls raise until `reopen()`."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def event_file_path(self) -> str | None:
        """The path of the open event file (None when closed)."""
        return self._file.path if self._file is not None else None

    # -- events -----------------------------------------------------------------------------------
    def add_event(self, event: Event):
        """Writes `event` as given (its wall_time and step are not touched)."""
        if not isinstance(event, Event):
            raise TypeError(f"add_event expects an Event proto, got {type(event).__name__}")
        if self._file is None:
            raise RuntimeError(f"FileWriter for {self._logdir} is closed; call reopen() first")
        self._file.put(encode_record(event.SerializeToString()))

    def _add_event(self, event: Event, step):
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    def add_summary(self, summary, global_step=None):
        """Writes a Summary proto or its serialized bytes (what a summary op returns).

        Plugin metadata is kept only on the first value of each tag, as TF1 does: TensorBoard
        needs it once.
        """
        if isinstance(summary, (bytes, bytearray)):
            parsed = Summary()
            parsed.ParseFromString(bytes(summary))
            summary = parsed
        elif not isinstance(summary, Summary):
            raise TypeError(
                f"add_summary expects a Summary proto or bytes, got {type(summary).__name__}"
            )
        else:
            copy = Summary()
            copy.CopyFrom(summary)
            summary = copy
        for value in summary.value:
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                value.ClearField("metadata")
            else:
                self._seen_summary_tags.add(value.tag)
        self._add_event(Event(summary=summary), global_step)

    def add_session_log(self, session_log, global_step=None):
        """Writes a SessionLog (START / STOP / CHECKPOINT marker)."""
        if not isinstance(session_log, SessionLog):
            raise TypeError(
                f"add_session_log expects a SessionLog, got {type(session_log).__name__}"
            )
        self._add_event(Event(session_log=session_log), global_step)

    @staticmethod
    def _graph_def_of(graph, graph_def) -> GraphDef:
        if graph is not None and hasattr(graph, "as_graph_def"):
            return graph.as_graph_def(add_shapes=True)
        candidate = graph if graph is not None else graph_def
        if not isinstance(candidate, GraphDef):
            raise TypeError(f"graph must be a Graph or GraphDef, got {type(candidate).__name__}")
        return candidate

    def add_graph(self, graph, global_step=None, graph_def=None):
        """Writes the graph (a Graph, or a GraphDef via `graph_def`) for TensorBoard's graph tab."""
        if graph is None and graph_def is None:
            raise ValueError("add_graph needs a graph or a graph_def")
        if self._graph_added:
            _log.warning(
                "Adding more than one graph event per run, or the same run twice; "
                "TensorBoard shows the last one."
            )
        self._graph_added = True
        serialized = self._graph_def_of(graph, graph_def).SerializeToString()
        self._add_event(Event(graph_def=serialized), global_step)

    def add_meta_graph(self, meta_graph_def, global_step=None):
        """Writes a MetaGraphDef."""
        if not isinstance(meta_graph_def, MetaGraphDef):
            raise TypeError(
                f"meta_graph_def must be a MetaGraphDef, got {type(meta_graph_def).__name__}"
            )
        self._meta_graph_added = True
        self._add_event(Event(meta_graph_def=meta_graph_def.SerializeToString()), global_step)

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        """Writes a RunMetadata (step stats of a traced run) under `tag`, once per tag."""
        if tag in self._run_metadata_tags:
            raise ValueError("The provided tag was already used for this event type")
        self._run_metadata_tags.add(tag)
        tagged = TaggedRunMetadata(tag=tag, run_metadata=run_metadata.SerializeToString())
        self._add_event(Event(tagged_run_metadata=tagged), global_step)


class FileWriterCache:
    """One shared FileWriter per log directory (TF1's `tf.summary.FileWriterCache`)."""

    _cache: ClassVar[dict[str, FileWriter]] = {}
    _lock = threading.Lock()

    @staticmethod
    def get(logdir) -> FileWriter:
        """The cached FileWriter for `logdir`, created on first use with the default graph."""
        with FileWriterCache._lock:
            key = os.fspath(logdir)
            if key not in FileWriterCache._cache:
                FileWriterCache._cache[key] = FileWriter(key, graph=get_default_graph())
            return FileWriterCache._cache[key]

    @staticmethod
    def clear():
        """Closes and forgets every cached FileWriter."""
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache.clear()

"""Readers (whitepaper §4.5): stateful ops that turn work items (file names) taken from a queue
into records. A reader is a resource in its device's container; it keeps the current work item
and its position, so successive ReaderRead steps continue where the last one stopped.

ReaderRead is an async kernel (§5.3): when the current file is exhausted the reader asks the
queue for the next work item with a continuation, so a reader waiting for file names parks no
thread. Requests to one reader are served one at a time, in arrival order (`_requests`).
The file formats themselves are in core/records.py.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from flowgraph.core import errors, records
from flowgraph.core.protos import ReaderBaseState
from flowgraph.kernels import resource_handles
from flowgraph.kernels.base import register_kernel


class _Request:
    """One read: `n` records wanted, `count` read so far in `pieces` (see ReaderBase.read)."""

    __slots__ = ("chunks", "count", "decode", "done", "n", "pieces", "queue", "step", "up_to")

    def __init__(self, step, queue, n, up_to, chunks, done, decode):
        self.step, self.queue, self.n, self.up_to, self.done = step, queue, n, up_to, done
        self.chunks, self.decode = chunks, decode
        self.count = 0
        self.pieces: list = []


def _outputs(pieces: list, up_to: bool, chunks: bool):
    """A read's result from its pieces: the records.Chunks, or (keys, values) as string vectors
    for ReadUpTo, scalars for Read."""
    if chunks:
        return pieces[0] if len(pieces) == 1 else [c for p in pieces for c in p]
    if len(pieces) == 1:
        keys, values = pieces[0]
    else:
        keys = [k for p in pieces for k in p[0]]
        values = [v for p in pieces for v in p[1]]
    if up_to:
        return np.array(keys, dtype=object), np.array(values, dtype=object)
    return np.array(keys[0], dtype=object), np.array(values[0], dtype=object)


def _chunks(values: list) -> list:
    """Records read as bytes objects as the records.Chunks of a chunked read (one; its
    offsets are 0: a chunked read makes no keys)."""
    if not values:
        return []
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    starts = np.cumsum(lengths) - lengths
    return [records.Chunk(b"".join(values), starts, lengths, np.zeros_like(starts))]


class ReaderBase:
    """The work-item machinery; subclasses open a work item and read its records.

    `lock` guards the counters, `_requests`, `_running` (a thread is serving requests),
    `_waiting` (a dequeue for work is outstanding) and `_arrived` (its result)."""

    kind = "Reader"

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.work: bytes | None = None
        self.work_started = 0
        self.work_finished = 0
        self.records_produced = 0
        self._requests: collections.deque = collections.deque()
        self._running = False
        self._waiting = False
        self._arrived = None

    # -- per format -----------------------------------------------------------------------------
    def _start(self, work: bytes, position: int = 0) -> None:
        """Opens `work` at `position`."""

    def _read(self, n: int) -> tuple[list, list]:
        """Up to `n` (keys, values) from the current work item; none once it is exhausted."""
        raise NotImplementedError

    def _read_piece(self, n: int, chunks: bool) -> tuple[int, object]:
        """(count, piece) of up to `n` records from the current work item: the piece is
        (keys, values), or with `chunks` a list of records.Chunk (formats that can cut
        records in place override this)."""
        keys, values = self._read(n)
        if chunks:
            return len(values), _chunks(values)
        return len(keys), (keys, values)

    def _read_parsed(self, n: int, decode) -> tuple[int, object]:
        """(count, what `decode` made of them) of up to `n` records of the current work item,
        decoded where they lie (records.RecordFile.read_parsed: fewer only at its end), or
        (0, None), nothing consumed (formats that keep their records in a buffer override
        this)."""
        return 0, None

    def _finish(self) -> None:
        """Closes the current work item."""

    def _position(self) -> int:
        return 0

    # -- requests -------------------------------------------------------------------------------
    def read(
        self, step, queue, n: int, up_to: bool, done, chunks: bool = False, decode=None
    ) -> None:
        """Reads `n` records (ReaderRead: 1; ReadUpTo: up to n, fewer at the end of a work
        item) and calls done(keys, values), or with `chunks` done(list of records.Chunk)
        (keys are not made: the fused read-and-parse needs none), or done(None, error).
        With `decode` too, a read that finds its records in the current work item's buffer
        calls done(tuple) with what `decode` made of them (_read_parsed; the fused kernel's
        steady state)."""
        with self.lock:
            busy = self._running or self._waiting
            now = not (busy or self._requests) and self.work is not None
            if not now:
                self._requests.append(_Request(step, queue, n, up_to, chunks, done, decode))
                if busy:
                    return
            self._running = True
        if now and self._read_now(step, queue, n, up_to, chunks, done, decode):
            return
        self._serve()

    def _read_now(self, step, queue, n: int, up_to: bool, chunks: bool, done, decode) -> bool:
        """The common case without a request object: the reader was idle with a work item
        open (this thread is its server). True when the read is done and the reader idle
        again; False when it became the head request (the work item ran out, or failed) and
        `_serve` must go on."""
        error = None
        try:
            count, piece = self._next_piece(n, chunks, decode)
        except errors.OpError as e:
            count, error = 0, e
        except (OSError, ValueError) as e:
            count, error = 0, errors.InvalidArgumentError(None, None, str(e))
        if count == n:
            with self.lock:
                self.records_produced += n
                more = bool(self._requests)  # arrived meanwhile: this thread serves them
                self._running = more
            done(_outputs([piece], up_to, chunks))
            return not more
        req = _Request(step, queue, n, up_to, chunks, done, decode)
        if count:
            req.count, req.pieces = count, [piece]
        with self.lock:
            self._requests.appendleft(req)  # it arrived before any request queued meanwhile
        if error is not None:
            self._complete(req, error)
        return False

    def _next_piece(self, n: int, chunks: bool, decode) -> tuple[int, object]:
        """_read_parsed's n records where `decode` is given and they are there, else
        _read_piece's."""
        count, piece = (0, None) if decode is None else self._read_parsed(n, decode)
        return (count, piece) if count else self._read_piece(n, chunks)

    def _serve(self) -> None:
        """Serves requests until none is left or one waits for work (lock not held)."""
        while True:
            with self.lock:
                if not self._requests:
                    self._running = False
                    return
                req = self._requests[0]
                arrived, self._arrived = self._arrived, None
            try:
                if arrived is not None:
                    pieces, error = arrived
                    if error is not None:
                        raise error
                    self._begin(req.queue.element(pieces)[0])
                finished = self._fill(req)
            except errors.OpError as e:
                self._complete(req, error=e)
                continue
            except (OSError, ValueError) as e:
                self._complete(req, error=errors.InvalidArgumentError(None, None, str(e)))
                continue
            if finished:
                self._complete(req)
                continue
            with self.lock:
                self._waiting = True
            req.queue.dequeue(req.step, 1, self._on_work)
            with self.lock:
                if self._arrived is None:  # the work comes later, to _on_work's thread
                    self._running = False
                    return

    def _on_work(self, pieces=None, error=None) -> None:
        with self.lock:
            self._arrived = (pieces, error)
            self._waiting = False
            if self._running:
                return
            self._running = True
        self._serve()

    def _begin(self, work) -> None:
        work = work.item() if isinstance(work, np.ndarray) else work
        work = work if isinstance(work, bytes) else str(work).encode()
        self._start(work)
        with self.lock:
            self.work = work
            self.work_started += 1

    def _fill(self, req: _Request) -> bool:
        """Adds records to `req`; True when it is complete, False when work must be dequeued."""
        while req.count < req.n:
            if self.work is None:
                return bool(req.count)  # read_up_to returns what one work item gave
            # a decoded piece is the read's only one: fewer than asked only at the work's end
            decode = None if req.count else req.decode
            count, piece = self._next_piece(req.n - req.count, req.chunks, decode)
            if count:
                req.count += count
                req.pieces.append(piece)
                continue
            self._finish()
            with self.lock:
                self.work = None
                self.work_finished += 1
            if req.count and req.up_to:
                return True
        return True

    def _complete(self, req: _Request, error=None) -> None:
        with self.lock:
            self._requests.popleft()
            if error is None:
                self.records_produced += req.count
        if error is not None:
            req.done(None, error)
        else:
            req.done(_outputs(req.pieces, req.up_to, req.chunks))

    # -- state ----------------------------------------------------------------------------------
    def reset(self) -> None:
        with self.lock:
            if self.work is not None:
                self._finish()
            self.work = None
            self.work_started = self.work_finished = self.records_produced = 0

    def serialize(self) -> bytes:
        with self.lock:
            return ReaderBaseState(
                work_started=self.work_started,
                work_finished=self.work_finished,
                num_records_produced=self.records_produced,
                current_work=self.work or b"",
                position=self._position() if self.work is not None else 0,
            ).SerializeToString()

    def restore(self, data: bytes) -> None:
        state = ReaderBaseState()
        try:
            state.ParseFromString(data)
        except Exception:  # noqa: BLE001  (protobuf's DecodeError has no common base we import)
            raise errors.InvalidArgumentError(
                None, None, f"Could not parse state for {self.kind} '{self.name}'"
            ) from None
        if state.work_started < state.work_finished or state.num_records_produced < 0:
            raise errors.InvalidArgumentError(
                None, None, f"Unexpected state for {self.kind} '{self.name}': {state}"
            )
        with self.lock:
            if self.work is not None:
                self._finish()
            self.work = None
            if state.current_work:
                self._start(state.current_work, state.position)
                self.work = state.current_work
            self.work_started = state.work_started
            self.work_finished = state.work_finished
            self.records_produced = state.num_records_produced


class TFRecordReader(ReaderBase):
    """Records of TFRecord files; the key is "file:offset"."""

    kind = "TFRecordReader"

    def __init__(self, name, compression_type):
        super().__init__(name)
        self.compression = records.check_compression(compression_type)
        self._file = None

    def _start(self, work, position=0):
        self._file = records.RecordFile(work.decode(), self.compression, position)

    def _read(self, n):
        offsets, values = self._file.read_many(n)
        return list(map((self.work.replace(b"%", b"%%") + b":%d").__mod__, offsets)), values

    def _read_piece(self, n, chunks):
        if not chunks:
            return super()._read_piece(n, False)
        got = self._file.read_chunks(n)  # the records stay in the file's buffer
        return sum(len(c.starts) for c in got), got

    def _read_parsed(self, n, decode):
        return self._file.read_parsed(n, decode)

    def _finish(self):
        self._file.close()

    def _position(self):
        return self._file.offset


class TextLineReader(ReaderBase):
    """Lines of text files (after `skip_header_lines`); the key is "file:line_number"."""

    kind = "TextLineReader"

    def __init__(self, name, skip_header_lines):
        super().__init__(name)
        self.skip_header_lines = skip_header_lines
        self._file = None

    def _start(self, work, position=0):
        self._file = records.TextLineFile(work.decode(), "", self.skip_header_lines)
        while self._file.line_number < position and self._file.read() is not None:
            pass

    def _read(self, n):
        keys, values = [], []
        f, prefix = self._file, self.work + b":"
        for _ in range(n):
            line = f.read()
            if line is None:
                break
            keys.append(prefix + str(f.line_number).encode())
            values.append(line)
        return keys, values

    def _finish(self):
        self._file.close()

    def _position(self):
        return self._file.line_number


class FixedLengthRecordReader(ReaderBase):
    """Fixed-size records between a header and a footer; the key is "file:record_number"."""

    kind = "FixedLengthRecordReader"

    def __init__(self, name, record_bytes, header_bytes, footer_bytes, hop_bytes, encoding):
        super().__init__(name)
        if record_bytes <= 0 or min(header_bytes, footer_bytes, hop_bytes) < 0:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"FixedLengthRecordReader: record_bytes must be > 0 and header_bytes, "
                f"footer_bytes, hop_bytes >= 0 (got {record_bytes}, {header_bytes}, "
                f"{footer_bytes}, {hop_bytes})",
            )
        self.args = (record_bytes, header_bytes, footer_bytes, hop_bytes)
        self.encoding = records.check_compression(encoding)
        self._file = None

    def _start(self, work, position=0):
        record, header, footer, hop = self.args
        self._file = records.FixedLengthFile(
            work.decode(), record, header, footer, hop, self.encoding
        )
        self._file.record_number = position

    def _read(self, n):
        first = self._file.record_number
        values = self._file.read_many(n)
        prefix = self.work + b":"
        return [prefix + str(first + i).encode() for i in range(len(values))], values

    def _finish(self):
        self._file.close()

    def _position(self):
        return self._file.record_number


class WholeFileReader(ReaderBase):
    """One record per file: the key is the file name, the value its contents."""

    kind = "WholeFileReader"

    def _start(self, work, position=0):
        self._done = position > 0

    def _read(self, n):
        if self._done:
            return [], []
        self._done = True
        with records.open_read(self.work.decode()) as f:
            return [self.work], [f.read()]

    def _position(self):
        return int(self._done)


class IdentityReader(ReaderBase):
    """One record per work item: key and value are the work item itself."""

    kind = "IdentityReader"

    def _start(self, work, position=0):
        self._done = position > 0

    def _read(self, n):
        if self._done:
            return [], []
        self._done = True
        return [self.work], [self.work]

    def _position(self):
        return int(self._done)


def _reader_kernel(make):
    def kernel(ctx):
        cached = ctx.state  # (container, name, reader, its handle), made once
        if cached is not None and ctx.resources.find(cached[0], cached[1]) is cached[2]:
            return cached[3]  # else the container was reset: find or make it again
        name = ctx.attrs.get("shared_name") or ctx.name
        container = ctx.attrs.get("container", "")
        reader = ctx.resources.lookup_or_create(container, name, lambda: make(name, ctx.attrs))
        ctx.state = (container, name, reader, resource_handles.handle_of(ctx, reader))
        return ctx.state[3]

    return kernel


_READERS = {
    "TFRecordReader": lambda name, a: TFRecordReader(name, a["compression_type"]),
    "TextLineReader": lambda name, a: TextLineReader(name, a["skip_header_lines"]),
    "FixedLengthRecordReader": lambda name, a: FixedLengthRecordReader(
        name,
        a["record_bytes"],
        a["header_bytes"],
        a["footer_bytes"],
        a["hop_bytes"],
        a["encoding"],
    ),
    "WholeFileReader": lambda name, a: WholeFileReader(name),
    "IdentityReader": lambda name, a: IdentityReader(name),
}
for _op, _make in _READERS.items():
    register_kernel(_op + "V2")(_reader_kernel(_make))


def handle_object(value):
    """The object behind a handle (a 0-d object array when it came through Pack/Gather)."""
    return value.item() if isinstance(value, np.ndarray) else value


@register_kernel("ReaderReadV2", async_=True)
def reader_read(ctx, step, done, reader, queue):
    handle_object(reader).read(step, handle_object(queue), 1, False, done)


@register_kernel("ReaderReadUpToV2", async_=True)
def reader_read_up_to(ctx, step, done, reader, queue, num_records):
    n = int(num_records)
    if n <= 0:
        raise errors.InvalidArgumentError(None, None, f"num_records must be positive, got {n}")
    handle_object(reader).read(step, handle_object(queue), n, True, done)


register_kernel("ReaderNumRecordsProducedV2")(
    lambda ctx, r: np.int64(handle_object(r).records_produced)
)
register_kernel("ReaderNumWorkUnitsCompletedV2")(
    lambda ctx, r: np.int64(handle_object(r).work_finished)
)
register_kernel("ReaderSerializeStateV2")(
    lambda ctx, r: np.array(handle_object(r).serialize(), dtype=object)
)


@register_kernel("ReaderRestoreStateV2")
def reader_restore_state(ctx, reader, state):
    handle_object(reader).restore(state.item() if isinstance(state, np.ndarray) else state)


@register_kernel("ReaderResetV2")
def reader_reset(ctx, reader):
    handle_object(reader).reset()


@register_kernel("ReadFile")
def read_file(ctx, filename):
    with records.open_read(_text(filename)) as f:
        return np.array(f.read(), dtype=object)


@register_kernel("WriteFile")
def write_file(ctx, filename, contents):
    with records.open_write(_text(filename)) as f:
        f.write(contents.item() if isinstance(contents, np.ndarray) else contents)


def _text(value) -> str:
    value = value.item() if isinstance(value, np.ndarray) else value
    return value.decode() if isinstance(value, bytes) else str(value)

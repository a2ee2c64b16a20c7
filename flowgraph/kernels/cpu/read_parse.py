"""ReaderReadUpToV2 -> ParseExample as one kernel (whitepaper §4.5: input ops that read
records directly), `_ReaderReadUpToParseExample`, made by runtime/passes/read_parse.py.

Unfused, a reader thread of the classic pipeline makes a bytes object and a key string per
record, two object arrays, then ParseExample joins the records back into one buffer and scans
it: all of it holding the GIL that the training step on the other core waits for (bench I2).
Fused, the reader cuts its records in place (records.RecordFile.read_chunks: frames found and
CRCs checked by one compiled walk) and the dense features are decoded straight from the
reader's buffer (dataset_wire.Layout, the parse of tf.data's parse-only maps); no key is made, since nothing reads the keys.

The results are ParseExample's on the records the read gives: the reader's requests, work
items, counters and errors are the unfused read's (readers.ReaderBase.read with `chunks`), and
where the records are not the wire fast path's plain case (a default fills a missing key, an
unusual encoding, string features), or names were given, they are made into bytes objects and
parsed by parsing.parse_example_batch, as ParseExample would.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import parsing
from flowgraph.kernels.cpu.dataset_wire import Layout
from flowgraph.kernels.cpu.readers import handle_object


@register_kernel("_ReaderReadUpToParseExample", async_=True)
def read_up_to_parse_example(ctx, step, done, reader, queue, num_records, names, *rest):
    n = int(num_records)
    if n <= 0:
        raise errors.InvalidArgumentError(None, None, f"num_records must be positive, got {n}")
    attrs, layout = ctx.attrs, _layout(ctx, names, rest)

    def parse(chunks=None, error=None):
        if error is not None:
            done(None, error)
            return
        try:
            out = parse_chunks(attrs, layout, chunks, names, rest)
        except Exception as e:  # noqa: BLE001 (the node's error, reported by the executor)
            done(None, e)
            return
        done(out)

    handle_object(reader).read(step, handle_object(queue), n, True, parse, chunks=True)


def _layout(ctx, names, rest: tuple):
    """(dataset_wire.Layout, dims) of the node's features (None: not the fast path), kept per
    keys."""
    a = ctx.attrs
    if a["Nsparse"] or np.size(names):
        return None
    keys = tuple(parsing.feature_keys(rest[: a["Ndense"]]))
    cached = ctx.state  # (keys, layout) of the last step
    if cached is None or cached[0] != keys:
        fast = parsing.dense_layout((), keys, a["Tdense"], a["dense_shapes"])
        cached = ctx.state = keys, fast and (Layout(fast[0]), fast[1])
    return cached[1]


def parse_chunks(attrs: dict, layout, chunks: list, names, rest: tuple) -> tuple:
    """ParseExample's outputs for the records of `chunks` (records.Chunk); `layout` is
    _layout's, or None where the wire fast path does not apply."""
    if layout is not None and chunks:
        out = _dense(chunks, layout[0])
        if out is not None:
            count = len(out[0])
            return tuple(a.reshape(count, *dims) for a, dims in zip(out, layout[1]))
    return parsing.parse_example_batch(attrs, _records(chunks), names, rest)


def _dense(chunks: list, layout: Layout) -> list | None:
    """Per key, the [records, size] values of all the chunks' records (one compiled call per
    chunk, as tf.data's parse-only maps); None if a record is not the plain case."""
    parts = []
    for c in chunks:
        part = layout.parse(np.frombuffer(c.buf, np.uint8), c.starts, c.starts + c.lengths)
        if part is None:
            return None
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return [np.concatenate(column) for column in zip(*parts)]


def _records(chunks: list) -> np.ndarray:
    """The chunks' records as a vector of bytes objects (ParseExample's `serialized`)."""
    out = [c.buf[s : s + m] for c in chunks for s, m in zip(c.starts.tolist(), c.lengths.tolist())]
    vector = np.empty(len(out), dtype=object)
    vector[:] = out
    return vector

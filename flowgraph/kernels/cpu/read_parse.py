"""ReaderReadUpToV2 -> ParseExample as one kernel (whitepaper §4.5: input ops that read
records directly), `_ReaderReadUpToParseExample`, made by runtime/passes/read_parse.py.

Unfused, a reader thread of the classic pipeline makes a bytes object and a key string per
record, two object arrays, then ParseExample joins the records back into one buffer and scans
it: all of it holding the GIL that the training step on the other core waits for (bench I2).
Fused, in the steady state (the n records lie whole in the reader's read-ahead buffer) one
compiled call frames them, checks their CRCs and decodes the dense features into the outputs
(dataset_wire.Layout.records via records.RecordFile.read_parsed); Python only advances the
reader's position and counters. Otherwise (a file's end, a record across blocks, a failure) the
reader cuts its records in place (records.RecordFile.read_chunks) and the features are decoded
from there (Layout.parse, the parse of tf.data's parse-only maps). No key is made, since nothing
reads the keys.

The results are ParseExample's on the records the read gives: the reader's requests, work
items, counters and errors are the unfused read's (readers.ReaderBase.read with `chunks`), and
where the records are not the wire fast path's plain case (a default fills a missing key, an
unusual encoding, string features), or names were given, they are made into bytes objects and
parsed by parsing.parse_example_batch, as ParseExample would.
"""

from __future__ import annotations

import operator

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

    def parse(result=None, error=None):
        if error is not None:
            done(None, error)
            return
        if type(result) is tuple:  # decoded in place by layout.records (the steady state)
            done(result)
            return
        try:
            out = parse_chunks(attrs, layout, result, names, rest)
        except Exception as e:  # noqa: BLE001 (the node's error, reported by the executor)
            done(None, e)
            return
        done(out)

    decode = layout and layout.records
    handle_object(reader).read(step, handle_object(queue), n, True, parse, True, decode)


def _layout(ctx, names, rest: tuple) -> Layout | None:
    """The dataset_wire.Layout of the node's features, in ParseExample's shapes (None: not
    the fast path), kept in its state with the inputs it was made for: the names and keys
    are Consts, the same arrays every step, so a step compares them by identity; other arrays
    are compared by their keys."""
    cached = ctx.state  # (names, rest, keys, layout)
    if cached is not None and cached[0] is names and all(map(operator.is_, cached[1], rest)):
        return cached[3]
    a = ctx.attrs
    if a["Nsparse"] or np.size(names):
        layout, keys = None, None
    else:
        keys = tuple(parsing.feature_keys(rest[: a["Ndense"]]))
        if cached is not None and cached[2] == keys:
            layout = cached[3]
        else:
            fast = parsing.dense_layout((), keys, a["Tdense"], a["dense_shapes"])
            layout = fast and Layout(*fast)
    ctx.state = names, rest, keys, layout
    return layout


def parse_chunks(attrs: dict, layout: Layout | None, chunks: list, names, rest: tuple) -> tuple:
    """ParseExample's outputs for the records of `chunks` (records.Chunk); `layout` is
    _layout's, or None where the wire fast path does not apply."""
    if layout is not None and chunks:
        out = _dense(chunks, layout)
        if out is not None:
            return tuple(out)
    return parsing.parse_example_batch(attrs, _records(chunks), names, rest)


def _dense(chunks: list, layout: Layout) -> list | None:
    """Per key, the values of all the chunks' records (one compiled call per
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

"""The fast path of ParseExample and ParseSingleExample (whitepaper §4.5: input ops that read
records directly): dense float and int64 features read from `tf.train.Example`'s wire format.

Decoding each record into protobuf objects and each value list into a Python sequence costs
about 30 us per record of two small features (the digits of issue 11's I2), and a scan of the
bytes in Python still about 15: more than a training step can spare on its reader threads. Here
one compiled pass (numba, like kernels/cpu/loops.py) over the whole batch finds where the packed
values of each wanted feature lie, decodes int64 varints and copies the float bytes.

Only the plain case is handled: every record holds every wanted key once, with the expected
kind, packed, and exactly the expected number of values, and keys are ASCII. Anything else (a
missing key that a default fills, unpacked or malformed encodings, an unknown field, a wrong
count) returns None, and the caller parses the batch with protobuf, which gives TensorFlow's
results and errors.

Wire format (tag = field number << 3 | wire type 2 for length-delimited): Example{features = 1},
Features{feature = 1: map entries {key = 1, value = 2}}, Feature{bytes_list = 1, float_list = 2,
int64_list = 3}, FloatList/Int64List{value = 1, packed: one length-delimited run}.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

_TAG_1, _TAG_2, _TAG_3 = 0x0A, 0x12, 0x1A  # fields 1, 2, 3, length-delimited
KIND_TAG = {np.dtype(np.float32): _TAG_2, np.dtype(np.int64): _TAG_3}
_ZERO = np.zeros(1, np.int64)
_copy_bytes = None  # byte_intrinsics', bound before _float_rows compiles


def _varint(buf, pos, end):
    """(value, position after it); position -1 if it runs past `end` or past 10 bytes."""
    result = 0
    shift = 0
    while pos < end and shift < 64:
        b = buf[pos]
        pos += 1
        result |= np.int64(b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    return 0, -1


def _field(buf, pos, end, tag):
    """(start, stop) of the length-delimited field `tag` at `pos`; start -1 if it is not."""
    if pos >= end or buf[pos] != tag:
        return -1, -1
    length, start = _varint(buf, pos + 1, end)
    if start < 0 or length < 0 or start + length > end:
        return -1, -1
    return start, start + length


def _key_index(buf, start, length, keys, key_start, key_end):
    """The index of the wanted key equal to buf[start:start + length]; -1 if none, -2 if the
    key is not ASCII (protobuf's UTF-8 check decides such records)."""
    for i in range(length):
        if buf[start + i] >= 0x80:
            return -2
    for k in range(key_start.size):
        if key_end[k] - key_start[k] != length:
            continue
        same = True
        for i in range(length):
            if keys[key_start[k] + i] != buf[start + i]:
                same = False
                break
        if same:
            return k
    return -1


def _scan(buf, rec_start, rec_end, keys, key_start, key_end, kind_tags, spans):
    """Fills spans[r, k] with the (start, stop) of record r's packed values of key k; returns
    False as soon as a record is not the plain case."""
    for r in range(rec_start.size):
        for k in range(key_start.size):
            spans[r, k, 0] = -1
        pos, end = rec_start[r], rec_end[r]
        while pos < end:
            f_start, f_stop = _field(buf, pos, end, _TAG_1)  # Example.features
            if f_start < 0:
                return False
            pos = f_stop
            while f_start < f_stop:
                e_start, e_stop = _field(buf, f_start, f_stop, _TAG_1)  # a map entry
                if e_start < 0:
                    return False
                f_start = e_stop
                k_start, k_len, v_start, v_stop = e_start, 0, -1, -1
                p = e_start
                while p < e_stop:
                    tag = buf[p]
                    a, b = _field(buf, p, e_stop, tag)
                    if a < 0 or (tag != _TAG_1 and tag != _TAG_2):
                        return False
                    if tag == _TAG_1:
                        k_start, k_len = a, b - a
                    else:
                        v_start, v_stop = a, b
                    p = b
                k = _key_index(buf, k_start, k_len, keys, key_start, key_end)
                if k == -2:
                    return False
                if k < 0:
                    continue
                if spans[r, k, 0] >= 0 or v_start < 0:
                    return False  # a duplicate key, or an empty Feature: protobuf decides
                l_start, l_stop = _field(buf, v_start, v_stop, kind_tags[k])
                if l_start < 0 or l_stop != v_stop:
                    return False
                if l_start == l_stop:  # an empty list
                    spans[r, k, 0], spans[r, k, 1] = l_start, l_start
                    continue
                s, t = _field(buf, l_start, l_stop, _TAG_1)
                if s < 0 or t != l_stop:
                    return False
                spans[r, k, 0], spans[r, k, 1] = s, t
        for k in range(key_start.size):
            if spans[r, k, 0] < 0:
                return False
    return True


def _int64s(buf, spans, k, size, out):
    """Decodes each record's varints of key k into out[r]; False unless exactly `size`."""
    for r in range(spans.shape[0]):
        pos, end = spans[r, k, 0], spans[r, k, 1]
        j = 0
        while pos < end:
            if j == size:
                return False
            value, pos = _varint(buf, pos, end)
            if pos < 0:
                return False
            out[r, j] = value
            j += 1
        if j != size:
            return False
    return True


def _float_rows(buf, spans, k, out):
    """Copies each record's packed float bytes of key k into its row of `out` (bytes, one row
    per record); False unless every record has exactly a row's worth."""
    flat, width = out.reshape(out.size), out.shape[1]
    for r in range(spans.shape[0]):
        start = spans[r, k, 0]
        if spans[r, k, 1] - start != width:
            return False
        _copy_bytes(flat, r * width, buf, start, width)
    return True


_lock = threading.Lock()
_compiled: dict = {}


def _kernels():
    """(_scan, _int64s, _float_rows) compiled on first use (cached on disk by numba). numba
    resolves the helpers they call by their global names when it compiles them, so the helpers'
    globals are rebound to their compiled versions first."""
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                from flowgraph.core import byte_intrinsics

                jit = numba.njit(nogil=True, cache=True)
                varint, field = jit(_varint), jit(_field)
                g = globals()
                g["_varint"], g["_field"] = varint, field
                g["_key_index"] = jit(_key_index)
                g["_copy_bytes"] = byte_intrinsics.intrinsics().copy_bytes
                _compiled["scan"], _compiled["int64s"] = jit(_scan), jit(_int64s)
                _compiled["float_rows"] = jit(_float_rows)
    return _compiled["scan"], _compiled["int64s"], _compiled["float_rows"]


class Spec:
    """What a batch parse needs of its features, built once per (keys, dtypes, sizes)."""

    def __init__(self, keys: tuple, np_dtypes: tuple, sizes: tuple):
        encoded = [k.encode("utf-8") for k in keys]
        key_len = np.array([len(k) for k in encoded], np.int64)
        self.key_end = np.cumsum(key_len)
        self.key_start = self.key_end - key_len
        self.key_buf = np.frombuffer(b"".join(encoded) or b"\0", np.uint8)
        self.tags = np.array([KIND_TAG[np.dtype(d)] for d in np_dtypes], np.uint8)
        self.floats = [np.dtype(d) == np.float32 for d in np_dtypes]
        self.sizes = sizes


@functools.lru_cache(maxsize=256)
def spec(keys: tuple, np_dtypes: tuple, sizes: tuple) -> Spec:
    return Spec(keys, np_dtypes, sizes)


def dense_batch(records: list, sp: Spec) -> list | None:
    """Per key of `sp`, a [len(records), size] array of its values; None if any record is not
    the plain case (see the module docstring)."""
    n = len(records)
    if n == 1:
        if not isinstance(records[0], bytes):
            return None
        rows = dense_one(records[0], sp)
        return None if rows is None else [row.reshape(1, -1) for row in rows]
    try:  # the records' bytes, one after the other; not the plain case if any is not bytes
        joined = b"".join(records)
    except TypeError:
        return None
    lengths = np.fromiter(map(len, records), np.int64, n)
    if int(lengths.sum()) != len(joined):  # a bytes-like record that is not bytes
        return None
    rec_end = np.cumsum(lengths)
    return dense_records(joined, rec_end - lengths, rec_end, sp)


def dense_records(data: bytes, rec_start: np.ndarray, rec_end: np.ndarray, sp: Spec):
    """dense_batch of the records data[rec_start[i]:rec_end[i]] (int64 arrays), read where
    they lie (a reader's buffer: kernels/cpu/read_parse.py)."""
    scan, int64s, float_rows = _kernels()
    n = len(rec_start)
    buf = np.frombuffer(data, np.uint8)
    spans = np.empty((n, len(sp.sizes), 2), np.int64)
    if not scan(buf, rec_start, rec_end, sp.key_buf, sp.key_start, sp.key_end, sp.tags, spans):
        return None
    out = []
    for k, size in enumerate(sp.sizes):
        if sp.floats[k]:
            values = np.empty((n, size), "<f4")
            if not float_rows(buf, spans, k, values.view(np.uint8)):
                return None
            out.append(values.astype(np.float32, copy=False))
        else:
            values = np.empty((n, size), np.int64)
            if not int64s(buf, spans, k, size, values):
                return None
            out.append(values)
    return out


def dense_one(record: bytes, sp: Spec) -> list | None:
    """Per key of `sp`, a [size] array of the values of one record (ParseSingleExample's case,
    which runs once per record: one scan, then a copy of the packed floats straight from the
    record's bytes); None if it is not the plain case."""
    scan, int64s, _ = _kernels()
    buf = np.frombuffer(record, np.uint8)
    spans = np.empty((1, len(sp.sizes), 2), np.int64)
    end = np.array([buf.size], np.int64)
    if not scan(buf, _ZERO, end, sp.key_buf, sp.key_start, sp.key_end, sp.tags, spans):
        return None
    out = []
    for k, (start, stop) in enumerate(spans[0].tolist()):
        size = sp.sizes[k]
        if sp.floats[k]:
            if stop - start != 4 * size:
                return None
            out.append(np.frombuffer(record, "<f4", size, start).astype(np.float32))
        else:
            values = np.empty((1, size), np.int64)
            if not int64s(buf, spans, k, size, values):
                return None
            out.append(values[0])
    return out

"""CPU kernels of the lookup tables (see flowgraph/opdefs/lookup.py).

A table keeps its keys sorted next to their values, so a lookup of a whole tensor of keys is
one `np.searchsorted` (strings are object arrays of bytes, which NumPy sorts and searches by
comparison). The table op finds or creates its table in the device's container, like a queue.
"""

from __future__ import annotations

import threading

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel

WHOLE_LINE, LINE_NUMBER = -2, -1  # TextFileIndex


def _show(x) -> str:
    return repr(x.item() if isinstance(x, np.generic) else x)


def _np(dtype) -> type:
    return object if dtype == dtypes.string else dtype.as_numpy_dtype


class LookupTable:
    """A hash table of scalar keys to scalar values. A static table (HashTableV2) is filled
    once by its initializer, which may run again with the same contents; a mutable one
    (MutableHashTableV2) takes inserts that replace values."""

    def __init__(self, name: str, key_dtype, value_dtype, mutable: bool):
        self.name = name
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self.mutable = mutable
        self.initialized = mutable
        self.keys = np.empty(0, _np(key_dtype))
        self.values = np.empty(0, _np(value_dtype))
        self.lock = threading.Lock()

    def check(self, key_dtype, value_dtype, what: str):
        if key_dtype != self.key_dtype or (
            value_dtype is not None and value_dtype != self.value_dtype
        ):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Conflicting {what} dtypes for table {self.name}: the table maps "
                f"{self.key_dtype.name} to {self.value_dtype.name}, got {key_dtype.name}"
                + ("" if value_dtype is None else f" to {value_dtype.name}"),
            )

    def insert(self, keys: np.ndarray, values: np.ndarray, replace: bool):
        keys = np.asarray(keys, _np(self.key_dtype)).reshape(-1)
        values = np.asarray(values, _np(self.value_dtype))
        if values.shape != keys.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected shape {list(keys.shape)} for values, got {list(values.shape)}",
            )
        with self.lock:
            all_keys = np.concatenate([keys, self.keys])  # new entries first: they win replaces
            all_values = np.concatenate([values, self.values])
            uniq, first, inverse = np.unique(all_keys, return_index=True, return_inverse=True)
            if not replace:
                kept = all_values[first][inverse.reshape(-1)]
                clash = kept != all_values
                if clash.any():
                    i = int(np.argmax(clash))
                    raise errors.FailedPreconditionError(
                        None,
                        None,
                        f"HashTable has different value for same key. Key {_show(all_keys[i])} "
                        f"has {_show(kept[i])} and trying to add value {_show(all_values[i])}",
                    )
            self.keys, self.values = uniq.astype(self.keys.dtype), all_values[first]
            self.initialized = True

    def remove(self, keys: np.ndarray):
        with self.lock:
            keep = ~np.isin(self.keys, np.asarray(keys, self.keys.dtype).reshape(-1))
            self.keys, self.values = self.keys[keep], self.values[keep]

    def find(self, keys: np.ndarray, default) -> np.ndarray:
        if not self.initialized:
            raise errors.FailedPreconditionError(None, None, f"Table {self.name} not initialized.")
        if np.ndim(default) != 0:
            raise errors.InvalidArgumentError(
                None, None, f"Expected shape [] for default_value, got {list(np.shape(default))}"
            )
        table_keys, table_values = self.keys, self.values  # one consistent snapshot
        flat = np.asarray(keys, table_keys.dtype).reshape(-1)
        out = np.full(flat.shape, default, dtype=table_values.dtype)
        if table_keys.size:
            at = np.clip(np.searchsorted(table_keys, flat), 0, table_keys.size - 1)
            found = table_keys[at] == flat
            out[found] = table_values[at[found]]
        return out.reshape(np.shape(keys))


def _table_kernel(mutable: bool):
    def kernel(ctx):
        cached = ctx.state
        if cached is not None:
            try:
                if ctx.resources.lookup(cached[0], cached[1]) is cached[2]:
                    return cached[2]
            except errors.NotFoundError:  # the container was reset: make the table again
                pass
        a = ctx.attrs
        name = a["shared_name"] or ctx.name
        table = ctx.resources.lookup_or_create(
            a["container"],
            name,
            lambda: LookupTable(name, a["key_dtype"], a["value_dtype"], mutable),
        )
        table.check(a["key_dtype"], a["value_dtype"], "key/value")
        ctx.state = (a["container"], name, table)
        return table

    return kernel


register_kernel("HashTableV2")(_table_kernel(mutable=False))
register_kernel("MutableHashTableV2")(_table_kernel(mutable=True))


@register_kernel("InitializeTableV2")
@register_kernel("LookupTableImportV2")
def initialize_table(ctx, table, keys, values):
    a = ctx.attrs
    table.check(a.get("Tkey", a.get("Tin")), a.get("Tval", a.get("Tout")), "initializer")
    if keys.ndim != 1 and not table.mutable:
        raise errors.InvalidArgumentError(None, None, f"Keys must be a vector, got {keys.ndim}-D")
    table.insert(keys, values, replace=table.mutable or ctx.op_type == "LookupTableImportV2")


@register_kernel("LookupTableInsertV2")
def lookup_table_insert(ctx, table, keys, values):
    if not table.mutable:
        raise errors.InvalidArgumentError(None, None, f"Table {table.name} is not mutable")
    table.check(ctx.attrs["Tin"], ctx.attrs["Tout"], "insert")
    table.insert(keys, values, replace=True)


@register_kernel("LookupTableRemoveV2")
def lookup_table_remove(ctx, table, keys):
    if not table.mutable:
        raise errors.InvalidArgumentError(None, None, f"Table {table.name} is not mutable")
    table.remove(keys)


@register_kernel("LookupTableFindV2")
def lookup_table_find(ctx, table, keys, default_value):
    table.check(ctx.attrs["Tin"], ctx.attrs["Tout"], "lookup")
    return table.find(keys, default_value)


@register_kernel("LookupTableSizeV2")
def lookup_table_size(ctx, table):
    return np.int64(table.keys.size)


@register_kernel("LookupTableExportV2")
def lookup_table_export(ctx, table):
    return table.keys.copy(), table.values.copy()


def _column(lines: list[bytes], index: int, dtype, delimiter: bytes, filename: str):
    """Column `index` of the file's lines (or the whole line, or the line number) as dtype."""
    if index == LINE_NUMBER:
        column = list(range(len(lines)))
    elif index == WHOLE_LINE:
        column = lines
    else:
        split = [line.split(delimiter) for line in lines]
        for n, cols in enumerate(split):
            if len(cols) <= index:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Invalid number of columns in {filename} line {n} ({lines[n]!r}) : expected "
                    f"{index + 1} got {len(cols)}",
                )
        column = [cols[index] for cols in split]
    if dtype == dtypes.string:
        out = np.empty(len(column), object)
        out[:] = [c if isinstance(c, bytes) else str(c).encode() for c in column]
        return out
    parse = float if dtype.is_floating else int
    try:
        return np.array([parse(c) for c in column], dtype.as_numpy_dtype)
    except ValueError as e:
        raise errors.InvalidArgumentError(
            None, None, f"Field in {filename} is not a valid {dtype.name}: {e}"
        ) from None


@register_kernel("InitializeTableFromTextFileV2")
def initialize_table_from_text_file(ctx, table, filename):
    a = ctx.attrs
    name = filename.item() if isinstance(filename, np.ndarray) else filename
    name = name.decode() if isinstance(name, bytes) else str(name)
    try:
        with open(name, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{name}: {e.strerror}") from None
    if lines and lines[-1] == b"":
        lines.pop()
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    vocab_size = a["vocab_size"]
    if vocab_size != -1:
        if len(lines) < vocab_size:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid vocab_size in {name}: expected {vocab_size} got {len(lines)}"
            )
        lines = lines[:vocab_size]
    delimiter = a["delimiter"].encode() if isinstance(a["delimiter"], str) else a["delimiter"]
    keys = _column(lines, a["key_index"], table.key_dtype, delimiter, name)
    values = _column(lines, a["value_index"], table.value_dtype, delimiter, name)
    table.insert(keys, values, replace=table.mutable)

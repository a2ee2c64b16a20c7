"""Lookup tables (TF1's tf.contrib.lookup / tf.lookup): HashTable with its initializers,
MutableHashTable, id tables with out-of-vocabulary hash buckets, the index_table_from_* and
index_to_string_table_from_* helpers, and tf.tables_initializer.

A table is a stateful resource (whitepaper §4.7): the table op outputs its handle, its
initializer op is added to the TABLE_INITIALIZERS collection that tf.tables_initializer()
groups, and lookups read it at run time.
"""

from __future__ import annotations

import collections

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.scopes import name_scope
from flowgraph.framework.sparse_tensor import SparseTensor

__all__ = ["initialize_all_tables", "tables_initializer"]


def tables_initializer(name="init_all_tables"):
    """One op running every table initializer of the default graph."""
    from flowgraph.ops.array import group, no_op

    initializers = default_graph.get().get_collection(GraphKeys.TABLE_INITIALIZERS)
    return group(*initializers, name=name) if initializers else no_op(name=name)


initialize_all_tables = tables_initializer


class LookupInterface:
    """What every table has: key and value dtypes, a name, size() and lookup()."""

    def __init__(self, key_dtype, value_dtype, name):
        self._key_dtype = dtypes.as_dtype(key_dtype)
        self._value_dtype = dtypes.as_dtype(value_dtype)
        self._name = name

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return self._value_dtype

    @property
    def name(self):
        return self._name

    def _check_keys(self, keys):
        if keys.dtype.base_dtype != self._key_dtype:
            raise TypeError(
                f"Signature mismatch. Keys must be dtype {self._key_dtype.name}, got "
                f"{keys.dtype.base_dtype.name}."
            )


class _Table(LookupInterface):
    """A table op's handle with find/size/export (shared by HashTable and MutableHashTable)."""

    def __init__(self, op_type, key_dtype, value_dtype, default_value, shared_name, name):
        super().__init__(key_dtype, value_dtype, name)
        self._resource_handle = apply_op(
            op_type,
            [],
            name=name,
            key_dtype=self._key_dtype,
            value_dtype=self._value_dtype,
            shared_name=shared_name or "",
        ).outputs[0]
        self._name = self._resource_handle.op.name
        self._default_value = convert_to_tensor(default_value, self._value_dtype)

    @property
    def resource_handle(self):
        return self._resource_handle

    @property
    def default_value(self):
        return self._default_value

    def size(self, name=None):
        """The number of entries, as an int64 scalar."""
        with name_scope(name, f"{self._name}_Size", [self._resource_handle]):
            return apply_op("LookupTableSizeV2", [self._resource_handle]).outputs[0]

    def lookup(self, keys, name=None):
        """The values of `keys` (a Tensor or SparseTensor), default_value where absent."""
        with name_scope(name, f"{self._name}_Lookup", [self._resource_handle]):
            sparse = keys if isinstance(keys, SparseTensor) else None
            keys = sparse.values if sparse is not None else convert_to_tensor(keys)
            if keys.dtype.base_dtype == dtypes.int32 and self._key_dtype == dtypes.int64:
                from flowgraph.ops.math import cast

                keys = cast(keys, dtypes.int64)  # int32 ids look up an int64-keyed table
            self._check_keys(keys)
            values = apply_op(
                "LookupTableFindV2", [self._resource_handle, keys, self._default_value]
            ).outputs[0]
            if sparse is not None:
                return SparseTensor(sparse.indices, values, sparse.dense_shape)
            return values

    def export(self, name=None):
        """(keys, values) of every entry."""
        with name_scope(name, f"{self._name}_Export", [self._resource_handle]):
            return tuple(
                apply_op(
                    "LookupTableExportV2",
                    [self._resource_handle],
                    Tkeys=self._key_dtype,
                    Tvalues=self._value_dtype,
                ).outputs
            )


class HashTable(_Table):
    """A table filled once by `initializer` (KeyValueTensorInitializer or TextFileInitializer)
    when tf.tables_initializer() runs; unknown keys give `default_value`.

    Example:
      table = tf.contrib.lookup.HashTable(
          tf.contrib.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=tf.int64), -1)
      ids = table.lookup(tf.constant(["b", "c"]))  # [2, -1] once tf.tables_initializer() ran
    """

    def __init__(self, initializer, default_value, shared_name=None, name=None):
        with name_scope(name, "hash_table", (initializer, default_value)) as scope:
            super().__init__(
                "HashTableV2",
                initializer.key_dtype,
                initializer.value_dtype,
                default_value,
                shared_name,
                scope,
            )
            self._initializer = initializer.initialize(self)
            default_graph.get().add_to_collection(GraphKeys.TABLE_INITIALIZERS, self._initializer)

    @property
    def initializer(self):
        return self._initializer

    init = initializer


class MutableHashTable(_Table):
    """A table changed at run time by insert() and remove(); unknown keys give default_value."""

    def __init__(
        self,
        key_dtype,
        value_dtype,
        default_value,
        shared_name=None,
        name="MutableHashTable",
        checkpoint=True,
    ):
        with name_scope(name, "MutableHashTable") as scope:
            super().__init__(
                "MutableHashTableV2", key_dtype, value_dtype, default_value, shared_name, scope
            )

    def insert(self, keys, values, name=None):
        """Sets the values of `keys` (replacing existing ones)."""
        with name_scope(name, f"{self._name}_lookup_table_insert", [self._resource_handle]):
            keys = convert_to_tensor(keys, self._key_dtype, name="keys")
            values = convert_to_tensor(values, self._value_dtype, name="values")
            return apply_op("LookupTableInsertV2", [self._resource_handle, keys, values])

    def remove(self, keys, name=None):
        """Deletes `keys` (absent ones are ignored)."""
        with name_scope(name, f"{self._name}_lookup_table_remove", [self._resource_handle]):
            keys = convert_to_tensor(keys, self._key_dtype, name="keys")
            return apply_op("LookupTableRemoveV2", [self._resource_handle, keys])


class KeyValueTensorInitializer:
    """Fills a table from the vectors `keys` and `values`."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        with name_scope(name, "key_value_init", [keys, values]) as scope:
            self._keys = convert_to_tensor(keys, dtype=key_dtype, name="keys")
            self._values = convert_to_tensor(values, dtype=value_dtype, name="values")
            self._name = scope
        self.key_dtype = self._keys.dtype.base_dtype
        self.value_dtype = self._values.dtype.base_dtype

    def initialize(self, table):
        with name_scope(self._name, values=(table.resource_handle, self._keys, self._values)):
            return apply_op("InitializeTableV2", [table.resource_handle, self._keys, self._values])


class TextFileIndex:
    WHOLE_LINE = -2
    LINE_NUMBER = -1


class TextFileInitializer:
    """Fills a table from a text file: keys and values are columns `key_index`/`value_index`
    (split at `delimiter`), or TextFileIndex.WHOLE_LINE / LINE_NUMBER."""

    def __init__(
        self,
        filename,
        key_dtype,
        key_index,
        value_dtype,
        value_index,
        vocab_size=None,
        delimiter="\t",
        name=None,
    ):
        self.key_dtype, self.value_dtype = dtypes.as_dtype(key_dtype), dtypes.as_dtype(value_dtype)
        for what, index, dtype in (
            ("key", key_index, self.key_dtype),
            ("value", value_index, self.value_dtype),
        ):
            if index < -2:
                raise ValueError(f"Invalid {what} index {index}.")
            if index == TextFileIndex.LINE_NUMBER and dtype != dtypes.int64:
                raise ValueError(
                    f"Signature mismatch. {what} must be dtype int64, got {dtype.name}."
                )
            if index == TextFileIndex.WHOLE_LINE and dtype != dtypes.string:
                raise ValueError(
                    f"Signature mismatch. {what} must be dtype string, got {dtype.name}."
                )
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"Invalid vocab_size {vocab_size}.")
        self._filename = filename
        self._key_index, self._value_index = key_index, value_index
        self._vocab_size = vocab_size
        self._delimiter = delimiter
        self._name = name

    def initialize(self, table):
        with name_scope(self._name, "text_file_init", (table.resource_handle,)):
            filename = convert_to_tensor(self._filename, dtypes.string, name="asset_filepath")
            op = apply_op(
                "InitializeTableFromTextFileV2",
                [table.resource_handle, filename],
                key_index=self._key_index,
                value_index=self._value_index,
                vocab_size=-1 if self._vocab_size is None else self._vocab_size,
                delimiter=self._delimiter,
            )
            default_graph.get().add_to_collection(GraphKeys.ASSET_FILEPATHS, filename)
            return op


class TextFileStringTableInitializer(TextFileInitializer):
    """Line number (int64) -> the line's column `value_column_index` (whole line by default)."""

    def __init__(
        self,
        filename,
        key_column_index=TextFileIndex.LINE_NUMBER,
        value_column_index=TextFileIndex.WHOLE_LINE,
        vocab_size=None,
        delimiter="\t",
        name="text_file_string_table_init",
    ):
        super().__init__(
            filename,
            dtypes.int64,
            key_column_index,
            dtypes.string,
            value_column_index,
            vocab_size,
            delimiter,
            name,
        )


class TextFileIdTableInitializer(TextFileInitializer):
    """The line's column `key_column_index` (whole line by default) -> line number (int64)."""

    def __init__(
        self,
        filename,
        key_column_index=TextFileIndex.WHOLE_LINE,
        value_column_index=TextFileIndex.LINE_NUMBER,
        vocab_size=None,
        delimiter="\t",
        name="text_file_id_table_init",
        key_dtype=dtypes.string,
    ):
        super().__init__(
            filename,
            key_dtype,
            key_column_index,
            dtypes.int64,
            value_column_index,
            vocab_size,
            delimiter,
            name,
        )


HasherSpec = collections.namedtuple("HasherSpec", ["hasher", "key"])
FastHashSpec = HasherSpec("fasthash", None)


class StrongHashSpec(HasherSpec):
    def __new__(cls, key):
        raise NotImplementedError("StrongHashSpec (keyed SipHash buckets) is not provided")


class IdTableWithHashBuckets(LookupInterface):
    """A string (or integer) -> id table whose unknown keys go to `num_oov_buckets` extra ids,
    size() + FarmHash(key) % num_oov_buckets, as in TensorFlow."""

    def __init__(self, table, num_oov_buckets, hasher_spec=FastHashSpec, name=None, key_dtype=None):
        if hasher_spec is not FastHashSpec and getattr(hasher_spec, "hasher", None) != "fasthash":
            raise NotImplementedError(f"hasher_spec {hasher_spec!r}: only FastHashSpec is provided")
        if num_oov_buckets < 0:
            raise ValueError(f"oov_buckets must be >= 0, got {num_oov_buckets}.")
        self._table = table
        self._num_oov_buckets = num_oov_buckets
        key_dtype = (
            table.key_dtype if table is not None else dtypes.as_dtype(key_dtype or dtypes.string)
        )
        super().__init__(key_dtype, dtypes.int64, name or (table.name if table else "hash_bucket"))

    @property
    def initializer(self):
        from flowgraph.ops.array import no_op

        return self._table.initializer if self._table is not None else no_op()

    init = initializer

    def size(self, name=None):
        with name_scope(name, f"{self.name}_Size"):
            base = self._table.size() if self._table is not None else 0
            return base + self._num_oov_buckets

    def lookup(self, keys, name=None):
        from flowgraph.ops.math import add, not_equal, where
        from flowgraph.ops.string_ops import as_string, string_to_hash_bucket_fast

        sparse = keys if isinstance(keys, SparseTensor) else None
        with name_scope(name, f"{self.name}_Lookup"):
            keys = sparse.values if sparse is not None else convert_to_tensor(keys)
            ids = self._table.lookup(keys) if self._table is not None else None
            if self._num_oov_buckets:
                text = keys if keys.dtype == dtypes.string else as_string(keys)
                buckets = string_to_hash_bucket_fast(text, self._num_oov_buckets)
                if ids is None:
                    ids = buckets
                else:
                    oov = add(buckets, self._table.size())
                    ids = where(not_equal(ids, self._table.default_value), ids, oov)
        if sparse is not None:
            return SparseTensor(sparse.indices, ids, sparse.dense_shape)
        return ids


def _int_keys(dtype):
    dtype = dtypes.as_dtype(dtype)
    if dtype not in (dtypes.string, dtypes.int32, dtypes.int64):
        raise ValueError(f"Invalid key dtype {dtype.name}: string or integer expected")
    return dtype


def index_table_from_tensor(
    vocabulary_list=None,
    num_oov_buckets=0,
    default_value=-1,
    hasher_spec=FastHashSpec,
    dtype=dtypes.string,
    name=None,
    mapping=None,
):
    """word -> its position in `vocabulary_list`; unknown words -> `default_value`, or one of
    `num_oov_buckets` hash buckets after the vocabulary."""
    from flowgraph.ops.array import range_, size
    from flowgraph.ops.math import cast

    vocabulary_list = mapping if vocabulary_list is None else vocabulary_list
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    dtype = _int_keys(dtype)
    with name_scope(name, "string_to_index"):
        keys = convert_to_tensor(vocabulary_list, dtype, name="vocabulary_list")
        table_keys = cast(keys, dtypes.int64) if dtype == dtypes.int32 else keys
        ids = range_(0, size(keys, out_type=dtypes.int64), dtype=dtypes.int64)
        init = KeyValueTensorInitializer(table_keys, ids, name="table_init")
        table = HashTable(init, default_value, name="hash_table")
        if num_oov_buckets:
            return IdTableWithHashBuckets(table, num_oov_buckets, hasher_spec)
        return table


def index_table_from_file(
    vocabulary_file=None,
    num_oov_buckets=0,
    vocab_size=None,
    default_value=-1,
    hasher_spec=FastHashSpec,
    key_dtype=dtypes.string,
    name=None,
    key_column_index=TextFileIndex.WHOLE_LINE,
    value_column_index=TextFileIndex.LINE_NUMBER,
    delimiter="\t",
):
    """word -> its line number in `vocabulary_file`; unknown words as index_table_from_tensor."""
    if vocabulary_file is None or (isinstance(vocabulary_file, str) and not vocabulary_file):
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    key_dtype = _int_keys(key_dtype)
    with name_scope(name, "string_to_index"):
        init = TextFileIdTableInitializer(
            vocabulary_file,
            key_column_index,
            value_column_index,
            vocab_size,
            delimiter,
            key_dtype=dtypes.int64 if key_dtype.is_integer else key_dtype,
        )
        table = HashTable(init, default_value, name="hash_table")
        if num_oov_buckets:
            return IdTableWithHashBuckets(table, num_oov_buckets, hasher_spec)
        return table


def index_to_string_table_from_tensor(
    vocabulary_list=None, default_value="UNK", name=None, mapping=None
):
    """int64 id -> the word at that position of `vocabulary_list`, else `default_value`."""
    from flowgraph.ops.array import range_, size

    vocabulary_list = mapping if vocabulary_list is None else vocabulary_list
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    with name_scope(name, "index_to_string"):
        values = convert_to_tensor(vocabulary_list, dtypes.string, name="vocabulary_list")
        ids = range_(0, size(values, out_type=dtypes.int64), dtype=dtypes.int64)
        init = KeyValueTensorInitializer(
            ids, values, dtypes.int64, dtypes.string, name="table_init"
        )
        return HashTable(init, default_value, name="hash_table")


def index_to_string_table_from_file(
    vocabulary_file,
    vocab_size=None,
    default_value="UNK",
    name=None,
    key_column_index=TextFileIndex.LINE_NUMBER,
    value_column_index=TextFileIndex.WHOLE_LINE,
    delimiter="\t",
):
    """int64 line number -> that line of `vocabulary_file`, else `default_value`."""
    with name_scope(name, "index_to_string"):
        init = TextFileStringTableInitializer(
            vocabulary_file, key_column_index, value_column_index, vocab_size, delimiter
        )
        return HashTable(init, default_value, name="hash_table")


def index_to_string(tensor, mapping, default_value="UNK", name=None):
    """The words of the int64 ids `tensor` (a table built and initialized with the graph's)."""
    table = index_to_string_table_from_tensor(mapping, default_value, name)
    return table.lookup(convert_to_tensor(tensor, dtypes.int64))


def string_to_index(tensor, mapping, default_value=-1, name=None):
    """The positions of the words `tensor` in `mapping` (-1 or `default_value` if absent)."""
    table = index_table_from_tensor(mapping, default_value=default_value, name=name)
    return table.lookup(tensor)


LOOKUP_NAMESPACE = {  # tf.contrib.lookup.<name>, also the TF1.15 tf.lookup names
    "HashTable": HashTable,
    "StaticHashTable": HashTable,
    "MutableHashTable": MutableHashTable,
    "KeyValueTensorInitializer": KeyValueTensorInitializer,
    "TextFileIndex": TextFileIndex,
    "TextFileInitializer": TextFileInitializer,
    "TextFileStringTableInitializer": TextFileStringTableInitializer,
    "TextFileIdTableInitializer": TextFileIdTableInitializer,
    "IdTableWithHashBuckets": IdTableWithHashBuckets,
    "HasherSpec": HasherSpec,
    "FastHashSpec": FastHashSpec,
    "StrongHashSpec": StrongHashSpec,
    "LookupInterface": LookupInterface,
    "index_table_from_tensor": index_table_from_tensor,
    "index_table_from_file": index_table_from_file,
    "index_to_string_table_from_tensor": index_to_string_table_from_tensor,
    "index_to_string_table_from_file": index_to_string_table_from_file,
    "index_to_string": index_to_string,
    "string_to_index": string_to_index,
    "tables_initializer": tables_initializer,
}

"""CPU kernels of checkpoint I/O (whitepaper §3.3): SaveV2 writes a tensor bundle, RestoreV2
reads tensors back, MergeV2Checkpoints joins per-device bundles into one (core/tensor_bundle.py
owns the format). They run on the device that owns the variables, like any other kernel."""

from __future__ import annotations

import contextlib

import numpy as np

from flowgraph.core import checkpoint_v1, errors, tensor_bundle, tensor_slice
from flowgraph.core.dtypes import as_dtype
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.sharding import parallel_for


def text(value) -> str:
    """A scalar string tensor's value as str."""
    v = np.asarray(value, dtype=object).reshape(-1)
    if v.size != 1:
        raise errors.InvalidArgumentError(None, None, f"expected a scalar string, got {v.size}")
    v = v[0]
    return v.decode() if isinstance(v, bytes) else str(v)


def texts(value) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(value).reshape(-1)]


@contextlib.contextmanager
def os_errors(what: str):
    """Turns an OSError into TensorFlow's class for it, naming the file."""
    try:
        yield
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{what}: {e}") from None
    except PermissionError as e:
        raise errors.PermissionDeniedError(None, None, f"{what}: {e}") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{what}: {e}") from None


def _check_counts(names, specs, n):
    if len(names) != n or len(specs) != n:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"tensor_names ({len(names)}), shape_and_slices ({len(specs)}) and "
            f"tensors ({n}) must have the same length",
        )


@register_kernel("SaveV2", expensive=True)
def save_v2(ctx, prefix, tensor_names, shape_and_slices, *tensors):
    prefix, names, specs = text(prefix), texts(tensor_names), texts(shape_and_slices)
    _check_counts(names, specs, len(tensors))
    kinds = ctx.attrs["dtypes"]
    with os_errors(f"saving checkpoint {prefix}"):
        writer = tensor_bundle.BundleWriter(prefix)
        try:
            for name, spec, value, dt in zip(names, specs, tensors, kinds):
                arr = np.asarray(value, dtype=tensor_bundle.numpy_dtype(_enum(dt)))
                parsed = tensor_slice.parse_shape_and_slice(spec)
                if parsed is None:
                    writer.add(name, arr)
                else:
                    writer.add_slice(name, parsed[0], parsed[1], arr)
            writer.finish()
        except BaseException:
            writer.abort()
            raise


def _enum(dt) -> int:
    return as_dtype(dt).base_dtype.as_datatype_enum


# The cost units (kernels/sharding.py) of reading and checking one byte: the read's copy
# out of the page cache and the CRC pass, ~0.2 ns together, 10x a multiply-add of SGEMM.
_BYTE_COST = 10
# Set by runtime/passes/borrowed_restores.py when every reader of every output copies it.
BORROW_ATTR = "_borrowed_outputs"


@register_kernel("RestoreV2", intra_op=True)
def restore_v2(ctx, prefix, tensor_names, shape_and_slices):
    """Checks every name, dtype and slice first, then reads the tensors in parallel on the
    device's pool (TensorFlow's RestoreV2 reads one after another): each shard reads, checks
    and converts whole tensors, and the read and CRC calls release the GIL."""
    prefix, names, specs = text(prefix), texts(tensor_names), texts(shape_and_slices)
    kinds = ctx.attrs["dtypes"]
    _check_counts(names, specs, len(kinds))
    # A prefix without a V2 `.index` is read as a V1 checkpoint, as TensorFlow's RestoreV2 does.
    with os_errors(f"restoring checkpoint {prefix}"), checkpoint_v1.open_checkpoint(prefix) as r:
        slices = [
            _checked(r, prefix, name, spec, dt) for name, spec, dt in zip(names, specs, kinds)
        ]
        bundle = isinstance(r, tensor_bundle.BundleReader)
        borrow = bundle and ctx.attrs.get(BORROW_ATTR, False)
        out = [None] * len(names)

        def read(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if slices[i] is not None:
                    out[i] = r.lookup_slice(names[i], slices[i])
                elif borrow:
                    out[i] = r.lookup(names[i], borrow=True)
                else:
                    out[i] = r.lookup(names[i])

        try:
            if bundle and len(names) > 1:
                mean = sum(r.nbytes(name) for name in names) / len(names)
                parallel_for(ctx, len(names), mean * _BYTE_COST, read)
            else:
                read(0, len(names))
            return tuple(out)
        finally:
            # An error's traceback holds this frame: without this, a raised DataLossError would
            # keep the tensors read so far (views of the mapped data file) alive.
            out.clear()


def _checked(r, prefix: str, name: str, spec: str, dt):
    """The slice `spec` asks for (None: the whole tensor), once `name` is found with dtype `dt`
    and, for a slice, the full shape the spec names."""
    stored = r.dtype(name)
    if stored != _enum(dt):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"tensor_name = {name}; expected dtype {as_dtype(dt).name} does "
            f"not equal restored dtype {as_dtype(stored).name} (checkpoint {prefix})",
        )
    parsed = tensor_slice.parse_shape_and_slice(spec)
    if parsed is None:
        return None
    shape, sl = parsed
    if tuple(shape) != r.shape(name):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"tensor_name = {name}; shape in shape_and_slice spec {shape} "
            f"does not match the shape stored in checkpoint: {list(r.shape(name))}",
        )
    return sl


@register_kernel("MergeV2Checkpoints", expensive=True)
def merge_v2_checkpoints(ctx, checkpoint_prefixes, destination_prefix):
    dest = text(destination_prefix)
    with os_errors(f"merging checkpoints into {dest}"):
        tensor_bundle.merge_bundles(
            texts(checkpoint_prefixes),
            dest,
            delete_old_dirs=ctx.attrs["delete_old_dirs"],
            allow_missing_files=ctx.attrs["allow_missing_files"],
        )


def _string(s: str) -> np.ndarray:
    return np.array(s.encode(), dtype=object)


@register_kernel("ShardedFilename")
def sharded_filename(ctx, basename, shard, num_shards):
    return _string(f"{text(basename)}-{int(shard):05d}-of-{int(num_shards):05d}")


@register_kernel("ShardedFilespec")
def sharded_filespec(ctx, basename, num_shards):
    return _string(f"{text(basename)}-?????-of-{int(num_shards):05d}")


# -- the V1 format (core/checkpoint_v1.py) ------------------------------------------------------
def _save_v1(ctx, filename, tensor_names, specs, tensors):
    filename, names = text(filename), texts(tensor_names)
    _check_counts(names, specs, len(tensors))
    entries = []
    for name, spec, value, dt in zip(names, specs, tensors, ctx.attrs["T"]):
        arr = np.asarray(value, dtype=tensor_bundle.numpy_dtype(_enum(dt)))
        parsed = tensor_slice.parse_shape_and_slice(spec)
        entries.append((name, *(parsed or (None, None)), arr))
    with os_errors(f"saving checkpoint {filename}"):
        checkpoint_v1.write_v1(filename, entries)


@register_kernel("Save", expensive=True)
def save(ctx, filename, tensor_names, *data):
    _save_v1(ctx, filename, tensor_names, [""] * len(data), data)


@register_kernel("SaveSlices", expensive=True)
def save_slices(ctx, filename, tensor_names, shapes_and_slices, *data):
    _save_v1(ctx, filename, tensor_names, texts(shapes_and_slices), data)


def _restore_v1(ctx, pattern, name, spec):
    pattern, name = text(pattern), text(name)
    with os_errors(f"restoring checkpoint {pattern}"), checkpoint_v1.V1Reader(pattern) as r:
        stored = r.dtype(name)
        if stored != _enum(ctx.attrs["dt"]):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Expected to restore a tensor of type {as_dtype(ctx.attrs['dt']).name},"
                f" got a tensor of type {as_dtype(stored).name} instead: tensor_name = {name}",
            )
        parsed = tensor_slice.parse_shape_and_slice(spec)
        if parsed is None:
            return r.lookup(name)
        return r.lookup_slice(name, parsed[1])


@register_kernel("Restore", expensive=True)
def restore(ctx, file_pattern, tensor_name):
    return _restore_v1(ctx, file_pattern, tensor_name, "")


@register_kernel("RestoreSlice", expensive=True)
def restore_slice(ctx, file_pattern, tensor_name, shape_and_slice):
    return _restore_v1(ctx, file_pattern, tensor_name, text(shape_and_slice))

"""`Dataset.from_generator`: elements produced by a Python generator, through TF's
GeneratorDataset op whose three library functions call PyFuncs: `init_func` starts a new
generator for each iterator (each epoch under repeat), `next_func` takes its next value
(StopIteration ends the sequence: the PyFunc raises OutOfRangeError), `finalize_func` drops it.
The generators live in this process, so such a graph runs only here (as in TensorFlow)."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from flowgraph.core import dtypes
from flowgraph.data.dataset_ops import Dataset, _op
from flowgraph.data.structure import Structure
from flowgraph.framework import convert, nest
from flowgraph.framework.function import trace
from flowgraph.ops.script_ops import py_func


class _GeneratorState:
    """The live generators of one from_generator dataset, by iterator id."""

    def __init__(self, generator, structure: Structure):
        self._generator = generator
        self._structure = structure
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._iterators: dict = {}  # guarded by _lock

    def start(self, *args):
        it = iter(self._generator(*args))
        with self._lock:
            i = next(self._ids)
            self._iterators[i] = it
        return np.int64(i)

    def next(self, i):
        with self._lock:
            it = self._iterators[int(i)]
        value = next(it)  # StopIteration: the PyFunc ends the sequence (OutOfRangeError)
        return self._flatten(value)

    def finish(self, i):
        with self._lock:
            self._iterators.pop(int(i), None)
        return np.int64(0)

    def _flatten(self, value):
        s = self._structure
        if (
            isinstance(value, list)
            and nest.is_sequence(s.nested)
            and not isinstance(s.nested, list)
        ):
            value = tuple(value)
        try:
            flat = nest.flatten(value) if nest.is_sequence(s.nested) else [value]
            if nest.is_sequence(s.nested):
                nest.assert_same_structure(s.nested, value)
        except (ValueError, TypeError) as e:
            raise TypeError(
                f"`generator` yielded an element that did not match the expected structure: {e}"
            ) from None
        out = []
        for v, spec in zip(flat, s.specs):
            arr = np.asarray(v, dtype=spec.dtype.as_numpy_dtype)
            kind = np.asarray(v).dtype.kind
            if (
                spec.dtype != dtypes.string
                and kind != arr.dtype.kind
                and (kind not in "biuf" or arr.dtype.kind not in "biuf")
            ):
                raise TypeError(
                    f"`generator` yielded an element of type {np.asarray(v).dtype} where an "
                    f"element of type {spec.dtype.name} was expected."
                )
            if not spec.shape.is_compatible_with(arr.shape):
                raise ValueError(
                    f"`generator` yielded an element of shape {list(arr.shape)} where an element "
                    f"of shape {spec.shape} was expected."
                )
            out.append(arr)
        return out


def from_generator(generator, output_types, output_shapes=None, args=None) -> Dataset:
    """A dataset of the values yielded by `generator(*args)` (a new generator per iterator)."""
    if not callable(generator):
        raise TypeError("`generator` must be callable.")
    structure = Structure.of_types(output_types, output_shapes)
    if structure.has_sparse:
        raise NotImplementedError("from_generator with SparseTensor components")
    state = _GeneratorState(generator, structure)
    arg_tensors = [convert.convert_to_tensor(a) for a in (args or ())]
    types = [t.dtype.base_dtype for t in arg_tensors]

    def init(*a):
        i = py_func(state.start, list(a), dtypes.int64, name="generator_start")
        i.set_shape([])
        return i

    def next_fn(i):
        values = py_func(state.next, [i], structure.types, name="generator_next")
        for v, shape in zip(values, structure.shapes):
            v.set_shape(shape)
        return tuple(values)

    def finish(i):
        return py_func(state.finish, [i], dtypes.int64, name="generator_finalize")

    init_f = trace(init, types, [t.shape for t in arg_tensors], "from_generator_init")
    next_f = trace(next_fn, [dtypes.int64], [[]], "from_generator_next")
    fin_f = trace(finish, [dtypes.int64], [[]], "from_generator_finalize")
    init_args = arg_tensors + init_f.captured_inputs
    variant = _op(
        "GeneratorDataset",
        [init_args, next_f.captured_inputs, fin_f.captured_inputs],
        structure,
        init_func=init_f.func_attr,
        next_func=next_f.func_attr,
        finalize_func=fin_f.func_attr,
        Tinit_func_args=[t.dtype.base_dtype for t in init_args],
        Tnext_func_args=[t.dtype.base_dtype for t in next_f.captured_inputs],
        Tfinalize_func_args=[t.dtype.base_dtype for t in fin_f.captured_inputs],
    )
    return Dataset(variant, structure)

"""Iterators over datasets in TF1 graph mode: a resource op holding the position (§4.7),
`get_next()` taking the next element (OutOfRangeError at the end).

* one-shot: `OneShotIterator` builds its dataset with a library function (the dataset's ops
  copied by value, so it needs no feeds) on first use; it cannot be re-initialized;
* initializable: `IteratorV2` + `MakeIterator` (its `initializer`), which may read fed
  placeholders; running the initializer again restarts it;
* reinitializable: `Iterator.from_structure(types, shapes)`, initialized from any dataset of
  that structure with `make_initializer(dataset)`;
* feedable: `Iterator.from_string_handle(handle_placeholder, types, shapes)` switches between
  iterators by feeding their `string_handle()` values.
"""

from __future__ import annotations

from flowgraph.data.structure import Structure
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.function import trace


class Iterator:
    """TF1's tf.data.Iterator."""

    def __init__(self, iterator_resource, initializer, structure: Structure):
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._structure = structure

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        """An uninitialized iterator for datasets of this structure (reinitializable)."""
        structure = Structure.of_types(output_types, output_shapes, output_classes)
        handle = apply_op(
            "IteratorV2",
            [],
            shared_name=shared_name or "",
            container="",
            output_types=structure.types,
            output_shapes=structure.shapes,
            name="Iterator",
        ).outputs[0]
        return Iterator(handle, None, structure)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None, output_classes=None):
        """An iterator that is whichever iterator's `string_handle()` is fed (feedable)."""
        structure = Structure.of_types(output_types, output_shapes, output_classes)
        handle = apply_op(
            "IteratorFromStringHandleV2",
            [string_handle],
            output_types=structure.types,
            output_shapes=structure.shapes,
        ).outputs[0]
        return Iterator(handle, None, structure)

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    def make_initializer(self, dataset, name=None):
        """An op that (re)starts this iterator on `dataset`, whose structure must match."""
        if not self._structure.is_compatible_with(dataset._structure):
            raise TypeError(
                f"Expected output types {self.output_types} and shapes {self.output_shapes} "
                f"but got dataset with types {dataset.output_types} and shapes "
                f"{dataset.output_shapes}"
            )
        return apply_op(
            "MakeIterator", [dataset._variant_tensor, self._iterator_resource], name=name
        )

    def get_next(self, name=None):
        """The next element, as the dataset's nested structure of Tensors."""
        s = self._structure
        op = apply_op(
            "IteratorGetNext",
            [self._iterator_resource],
            name=name,
            output_types=s.types,
            output_shapes=s.shapes,
        )
        return s.pack(op.outputs)

    def string_handle(self, name=None):
        """A string tensor naming this iterator, to feed a `from_string_handle` iterator."""
        return apply_op("IteratorToStringHandle", [self._iterator_resource], name=name).outputs[0]

    @property
    def output_types(self):
        return self._structure.output_types()

    @property
    def output_shapes(self):
        return self._structure.output_shapes()

    @property
    def output_classes(self):
        return self._structure.output_classes()


def make_one_shot_iterator(dataset) -> Iterator:
    """An iterator initialized on first use; `dataset` must not depend on feeds or variables."""
    s = dataset._structure
    factory = trace(lambda: dataset._variant_tensor, [], [], "_make_dataset", capture_by_value=True)
    handle = apply_op(
        "OneShotIterator",
        [],
        dataset_factory=factory.func_attr,
        output_types=s.types,
        output_shapes=s.shapes,
    ).outputs[0]
    return Iterator(handle, None, s)


def make_initializable_iterator(dataset, shared_name=None) -> Iterator:
    """An iterator started (and restarted) by running its `initializer`."""
    s = dataset._structure
    handle = apply_op(
        "IteratorV2",
        [],
        shared_name=shared_name or "",
        container="",
        output_types=s.types,
        output_shapes=s.shapes,
        name="Iterator",
    ).outputs[0]
    init = apply_op("MakeIterator", [dataset._variant_tensor, handle])
    return Iterator(handle, init, s)


def get_output_types(obj):
    return obj.output_types


def get_output_shapes(obj):
    return obj.output_shapes


def get_output_classes(obj):
    return obj.output_classes

"""Nested structures (lists, tuples, namedtuples, dicts) as loop variables, cond results and
fetches: flatten them to a list of leaves and pack a list back into the same shape."""

from __future__ import annotations


def is_sequence(x) -> bool:
    return isinstance(x, (list, tuple, dict))


def _children(x):
    if isinstance(x, dict):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(structure) -> list:
    if not is_sequence(structure):
        return [structure]
    out = []
    for child in _children(structure):
        out.extend(flatten(child))
    return out


def pack_sequence_as(structure, flat):
    flat = list(flat)
    packed, used = _pack(structure, flat, 0)
    if used != len(flat):
        raise ValueError(
            f"Structure had {used} elements, but flat_sequence had {len(flat)} elements."
        )
    return packed


def _pack(structure, flat, i):
    if not is_sequence(structure):
        if i >= len(flat):
            raise ValueError("flat_sequence has fewer elements than the structure needs")
        return flat[i], i + 1
    if isinstance(structure, dict):
        out = {}
        for k in sorted(structure):
            out[k], i = _pack(structure[k], flat, i)
        return type(structure)(out) if type(structure) is not dict else out, i
    items = []
    for child in structure:
        item, i = _pack(child, flat, i)
        items.append(item)
    if hasattr(structure, "_fields"):
        return type(structure)(*items), i
    return type(structure)(items), i


def assert_same_structure(a, b, what: str = "structures"):
    """Raises ValueError naming the difference, like TF's nest.assert_same_structure."""
    if is_sequence(a) != is_sequence(b):
        raise ValueError(f"The two {what} don't have the same nested structure: {a!r} vs {b!r}")
    if not is_sequence(a):
        return
    if isinstance(a, dict) != isinstance(b, dict) or (
        isinstance(a, dict) and sorted(a) != sorted(b)
    ):
        raise ValueError(f"The two {what} don't have the same nested structure: {a!r} vs {b!r}")
    ca, cb = _children(a), _children(b)
    if len(ca) != len(cb):
        raise ValueError(
            f"The two {what} don't have the same number of elements: {len(ca)} vs {len(cb)} ({a!r} vs {b!r})"
        )
    for x, y in zip(ca, cb):
        assert_same_structure(x, y, what)


def map_structure(fn, *structures):
    flat = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flat)])

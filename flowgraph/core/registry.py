"""One registry abstraction for the tables the system is built from (whitepaper §2, "Operations
and Kernels"): op definitions (core/op_def.py), kernels keyed by (op, device type, dtypes)
(kernels/base.py), gradient functions (gradients/registry.py) and device types
(runtime/device.py).

As in TensorFlow's python/framework/registry.py, every entry remembers where it was registered:
the `file:line` of the first caller outside the registration machinery. A second registration
of a key raises AlreadyExistsError naming both sites, so two modules can never silently claim
the same op, kernel or gradient. Registries keyed by op type also say which op a key belongs
to, and `describe(op_type)` answers where op X's definition, kernels and gradient live:

    >>> print(format_description("MatMul"))
    MatMul
      op        flowgraph/opdefs/linalg.py:12
      kernel    CPU T in {bfloat16}  flowgraph/kernels/cpu/bfloat16.py:81
      kernel    CPU  flowgraph/kernels/cpu/linalg.py:32
      gradient  flowgraph/gradients/linalg.py:15

Lookups (`get`, `in`) are one dict access: the runtime calls them while building plans and
graph construction calls them per op.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Hashable, Iterator
from typing import Any, NamedTuple

from flowgraph.core import errors

# Files whose functions are registration machinery (a wrapper such as register_kernel), skipped
# when finding where an entry was registered; their module-level code is a site like any other.
# Modules add themselves with `machinery(__file__)`.
_MACHINERY: set[str] = {__file__}
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The registries that are keyed by op type (or by tuples starting with it); `describe` lists
# them in the order of _DESCRIBE_ORDER, then in creation order.
_BY_OP: list[Registry] = []
_DESCRIBE_ORDER = ("op", "kernel", "gradient")


def machinery(filename: str) -> None:
    """Declares `filename` (a module's __file__) a registration wrapper: sites skip its frames."""
    _MACHINERY.add(filename)


def caller_site() -> str:
    """'file:line' of the innermost frame outside the registration machinery's functions; paths
    inside the flowgraph checkout are relative to it (flowgraph/kernels/cpu/math.py:137)."""
    frame = sys._getframe(1)
    while (
        frame is not None
        and frame.f_code.co_filename in _MACHINERY
        and frame.f_code.co_name != "<module>"
    ):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    path = frame.f_code.co_filename
    if path.startswith(_PACKAGE_PARENT + os.sep):
        path = path[len(_PACKAGE_PARENT) + 1 :]
    return f"{path}:{frame.f_lineno}"


class DuplicateRegistrationError(errors.AlreadyExistsError, KeyError):
    """A key registered twice. It is also a KeyError, which TF1's registries raise for a
    duplicate: programs catch KeyError around `tf.RegisterGradient` to re-run a cell."""


class Registry:
    """A table from keys to values that records each key's registration site.

    Args:
      what: what an entry is, for messages ("op", "kernel", "gradient", "device type").
      op_type_of: for a registry keyed by op type, maps a key to its op type; such a registry
        takes part in `describe`.
      summary: one line about an entry for `describe` (a kernel's device and dtypes); entries
        with equal summaries and sites are listed once.
      key_text: how messages write a key (default: repr).
    """

    def __init__(
        self,
        what: str,
        *,
        op_type_of: Callable[[Hashable], str] | None = None,
        summary: Callable[[Hashable, Any], str] | None = None,
        key_text: Callable[[Hashable], str] = repr,
    ):
        self.what = what
        self._entries: dict[Hashable, Any] = {}
        self._sites: dict[Hashable, str] = {}
        self._op_type_of = op_type_of
        self._summary = summary
        self._key_text = key_text
        if op_type_of is not None:
            _BY_OP.append(self)

    def register(self, key: Hashable, value: Any, site: str | None = None) -> None:
        """Adds `key` -> `value`; DuplicateRegistrationError (an AlreadyExistsError) naming
        both sites if `key` is taken."""
        site = site or caller_site()
        if key in self._entries:
            raise DuplicateRegistrationError(
                None,
                None,
                f"{self.what} {self._key_text(key)} already registered at {self._sites[key]} "
                f"(again at {site})",
            )
        self._entries[key] = value
        self._sites[key] = site

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self._entries.get(key, default)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._entries)

    def items(self):
        return self._entries.items()

    def site(self, key: Hashable) -> str:
        """Where `key` was registered; KeyError if it was not."""
        return self._sites[key]

    def entries_of_op(self, op_type: str) -> list[tuple[str, str]]:
        """(summary, site) of every entry of `op_type`, duplicates listed once."""
        if self._op_type_of is None:
            return []
        out: dict[tuple[str, str], None] = {}
        for key, value in self._entries.items():
            if self._op_type_of(key) == op_type:
                summary = self._summary(key, value) if self._summary else ""
                out[(summary, self._sites[key])] = None
        return list(out)


class Entry(NamedTuple):
    """One line of `describe`: which registry, what the entry says, where it was registered."""

    what: str
    summary: str
    site: str


def describe(op_type: str) -> list[Entry]:
    """Where `op_type`'s definition, kernels and gradient were registered. Only registries
    imported so far answer: `import flowgraph` first for all of them."""
    registries = sorted(_BY_OP, key=_describe_rank)
    return [
        Entry(reg.what, summary, site)
        for reg in registries
        for summary, site in reg.entries_of_op(op_type)
    ]


def _describe_rank(reg: Registry) -> int:
    return _DESCRIBE_ORDER.index(reg.what) if reg.what in _DESCRIBE_ORDER else len(_DESCRIBE_ORDER)


def format_description(op_type: str) -> str:
    """`describe(op_type)` as text; NotFoundError if no registry knows `op_type`."""
    entries = describe(op_type)
    if not entries:
        raise errors.NotFoundError(
            None, None, f"No op, kernel or gradient registered for '{op_type}'"
        )
    width = max(len(e.what) for e in entries) + 2
    lines = [op_type]
    for e in entries:
        summary = f"{e.summary}  " if e.summary else ""
        lines.append(f"  {e.what:<{width}}{summary}{e.site}")
    return "\n".join(lines)

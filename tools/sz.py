"""Prints the line count of every module (STYLE.md convention 12), largest first, and flags
those over the ~600-line budget. Generated protobuf code is left out."""

from __future__ import annotations

import sys
from pathlib import Path

BUDGET = 600


def main(root: str = "flowgraph") -> int:
    sizes = sorted(
        (
            (sum(1 for _ in p.open()), p)
            for p in Path(root).rglob("*.py")
            if not p.name.endswith("_pb2.py")
        ),
        reverse=True,
    )
    total = sum(n for n, _ in sizes)
    for n, p in sizes[:25]:
        print(f"{n:6d}  {p}{'   (over budget)' if n > BUDGET else ''}")
    print(f"{total:6d}  total in {len(sizes)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

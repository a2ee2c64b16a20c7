"""Smoke test of bench/distributed.py: D1, D2 and D3 run end to end and print their rows, so
the benchmark cannot rot. Timings are never asserted (they belong to the benchmark's output)."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "distributed.py"


def test_quick_run_prints_d1_d2_and_d3():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout
    assert re.search(
        r"D1 RecvTensor 64 MiB float32: \d+ MB/s \(socket transport\), gRPC stream \d+ MB/s, "
        r"gRPC floor.* \d+ MB/s, raw socket \d+",
        out,
    )
    assert len(re.findall(r"D2 trivial step, grpc.*overhead [\d.]+ ms", out)) == 2
    for workers in (1, 2):  # steps/s per worker and total, step ms, RPC fractions, CPU, loss
        assert re.search(rf"\n +{workers} +[\d.]+ +[\d.]+ +[\d.]+ +\d+% +\d+% .*->", out)
    assert re.search(r"D3 projected .* saturates at [\d.]+ workers", out)
    assert len(re.findall(r"workers: +[\d.]+ steps/s total", out)) == 5

"""The TensorFlow peer: runs the workloads with real TensorFlow in its own interpreter.

`run.py` starts this script with the TensorFlow virtual environment's Python (TensorFlow is never
a flowgraph dependency and never shares a process with it: both register protobuf messages).
It uses `tensorflow.compat.v1` with `disable_v2_behavior()`, the same workload functions and the
same timing protocol as the flowgraph side.

Protocol (line-based, so that the driver can interleave the peers workload by workload and both
see the same background load): first one line `FLOWGRAPH_BENCH_TF_META {json}` with the
environment; then for each request line `<workload id>[,<id>...] [quick]` read from stdin, one
line `FLOWGRAPH_BENCH_TF {json result}` per id (several ids: measured interleaved, as
`harness.measure_interleaved`). The peer exits at the end of stdin.
By hand: `printf 'W1 quick\\n' | /opt/tfbench/bin/python bench/tf_side.py`.
"""

from __future__ import annotations

import json
import os
import sys

META_PREFIX = "FLOWGRAPH_BENCH_TF_META "
RESULT_PREFIX = "FLOWGRAPH_BENCH_TF "


def main() -> int:
    # Read before TensorFlow starts: the value decides whether oneDNN kernels run (unset = on).
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep C++ info logs out of the output

    import numpy as np
    import tensorflow
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()

    import harness
    import workloads

    meta = {
        "tf_version": tensorflow.__version__,
        "numpy_version": np.__version__,
        "TF_ENABLE_ONEDNN_OPTS": onednn,
        "python": sys.version.split()[0],
    }
    print(META_PREFIX + json.dumps(meta), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        keys, quick = words[0].split(","), "quick" in words[1:]
        unknown = [k for k in keys if k not in workloads.BY_KEY]
        if unknown:
            results = [harness.Result(k, error=f"KeyError: unknown workload {k!r}") for k in keys]
        else:
            results = harness.measure_group([workloads.BY_KEY[k] for k in keys], tf, quick)
        for result in results:
            print(RESULT_PREFIX + json.dumps(result.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

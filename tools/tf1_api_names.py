"""Writes flowgraph/tf1_api.txt, TensorFlow 1.x's public names per module, from an installed
TensorFlow 2.x's tf.compat.v1 (run it with that TensorFlow's Python; it is not a dependency).

Modules that are TF 2.x only or not TF1 programs' API (compat, raw_ops, keras, lite, ...) are
skipped; tf.layers and tf.nn.rnn_cell, which TF 2.x no longer exports under Keras 3, and
tf.distribute.cluster_resolver (tf.distribute is otherwise TF 2's strategies) are added from
TF 1.15's documentation.
"""

import collections
import sys
import types
from pathlib import Path

import tensorflow as tf

SKIP = {
    "compat",
    "raw_ops",
    "keras",
    "lite",
    "mlir",
    "tpu",
    "distribute",
    "autograph",
    "estimator",
    "feature_column",
    "ragged",
    "experimental",
    "tools",
    "types",
    "dtensor",
    "xla",
    "mixed_precision",
    "config",
    "tf_decorator",
}
ADDED = {
    "layers": "AveragePooling1D AveragePooling2D AveragePooling3D BatchNormalization Conv1D "
    "Conv2D Conv2DTranspose Conv3D Conv3DTranspose Dense Dropout Flatten InputSpec Layer "
    "MaxPooling1D MaxPooling2D MaxPooling3D SeparableConv1D SeparableConv2D average_pooling1d "
    "average_pooling2d average_pooling3d batch_normalization conv1d conv2d conv2d_transpose "
    "conv3d conv3d_transpose dense dropout flatten max_pooling1d max_pooling2d max_pooling3d "
    "separable_conv1d separable_conv2d",
    "distribute.cluster_resolver": "ClusterResolver GCEClusterResolver KubernetesClusterResolver "
    "SimpleClusterResolver SlurmClusterResolver TFConfigClusterResolver TPUClusterResolver "
    "UnionResolver",
    "nn.rnn_cell": "BasicLSTMCell BasicRNNCell DeviceWrapper DropoutWrapper GRUCell LSTMCell "
    "LSTMStateTuple MultiRNNCell RNNCell ResidualWrapper",
}
HEADER = """\
# TensorFlow 1.x's public API (module path, then its names), as tf.compat.v1 of TensorFlow
# 2.x lists it, with tf.layers, tf.nn.rnn_cell and tf.distribute.cluster_resolver added from
# TF 1.15's documentation. Read by
# flowgraph/api_surface.py: a listed name flowgraph lacks raises NotImplementedError naming it.
# Regenerate with tools/tf1_api_names.py (needs TensorFlow).
"""


def walk(root) -> dict[str, list[str]]:
    """Breadth first, so each module is listed under its shortest path."""
    table, seen = {}, set()
    queue = collections.deque([(root, "")])
    while queue:
        module, path = queue.popleft()
        if id(module) in seen:
            continue
        seen.add(id(module))
        names = []
        for key in sorted(dir(module)):
            if key.startswith("_"):
                continue
            try:
                value = getattr(module, key)
            except Exception:  # noqa: BLE001, S112 - lazily loaded modules that fail under Keras 3
                continue
            if isinstance(value, types.ModuleType):
                if key not in SKIP and "tensorflow" in getattr(value, "__name__", ""):
                    queue.append((value, f"{path}.{key}" if path else key))
            else:
                names.append(key)
        table[path] = names
    return table


def main(out: Path) -> None:
    table = walk(tf.compat.v1)
    for path, names in ADDED.items():
        table[path] = names.split()
    lines = [f"{path or '.'}: {' '.join(sorted(table[path]))}" for path in sorted(table)]
    out.write_text(HEADER + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("flowgraph/tf1_api.txt"))

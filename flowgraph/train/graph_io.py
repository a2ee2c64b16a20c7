"""tf.train.write_graph / tf.io.write_graph: a GraphDef to a file, binary or text, written under
a temporary name and renamed (TF1's graph_io.py)."""

from __future__ import annotations

import os

from google.protobuf import text_format

from flowgraph.core.protos import GraphDef
from flowgraph.core.tensor_bundle import fs, temp_suffix

__all__ = ["write_graph"]


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Writes the graph's GraphDef to logdir/name; returns the path.

    Example: tf.train.write_graph(sess.graph, "/tmp/model", "graph.pbtxt")"""
    if isinstance(graph_or_graph_def, GraphDef):
        graph_def = graph_or_graph_def
    elif hasattr(graph_or_graph_def, "as_graph_def"):
        graph_def = graph_or_graph_def.as_graph_def()
    else:
        raise TypeError(f"write_graph needs a Graph or GraphDef, got {type(graph_or_graph_def)}")
    logdir = os.fspath(logdir)
    if logdir:
        os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    data = (
        text_format.MessageToString(graph_def).encode()
        if as_text
        else graph_def.SerializeToString()
    )
    tmp = path + temp_suffix()
    with fs.open_write(tmp) as f:
        f.write(data)
    fs.rename(tmp, path)
    return path

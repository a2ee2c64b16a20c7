"""flowgraph and real TensorFlow processes talk to each other (DESIGN.md decision 6): a TF 2.x
client (tf.compat.v1.Session("grpc://...")) runs a graph on a flowgraph server, and a flowgraph
client runs one on a TensorFlow server. Skipped where no TensorFlow is installed (it is never a
dependency: it runs in its own interpreter, /opt/tfbench/bin/python or
$FLOWGRAPH_BENCH_TF_PYTHON)."""

import os
import socket
import subprocess

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed import grpc_worker

TF_PYTHON = os.environ.get("FLOWGRAPH_BENCH_TF_PYTHON", "/opt/tfbench/bin/python")
pytestmark = pytest.mark.skipif(not os.path.exists(TF_PYTHON), reason="no TensorFlow installed")

TF_CLIENT = """
import sys
import tensorflow as tf
tf1 = tf.compat.v1
tf1.disable_v2_behavior()
a = tf1.placeholder(tf.float32, [2])
b = a * 2.0 + 1.0
v = tf1.Variable(3.0)
with tf1.Session(sys.argv[1], config=tf1.ConfigProto(operation_timeout_in_ms=60000)) as sess:
    print("fetched", sess.run(b, {a: [1.0, 2.0]}).tolist())
    sess.run(v.initializer)
    print("variable", sess.run(v.assign_add(1.0)))
"""

TF_SERVER = """
import ctypes, sys
ctypes.CDLL(None).prctl(1, 9)  # die with the test process
import tensorflow as tf
tf.distribute.Server({"worker": [sys.argv[1]]}, job_name="worker", task_index=0).join()
"""


def test_tensorflow_client_runs_a_graph_on_a_flowgraph_server(grpc_cluster):
    cluster = grpc_cluster({"worker": 1})
    out = subprocess.run(
        [TF_PYTHON, "-c", TF_CLIENT, cluster.target("worker", 0)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fetched [3.0, 5.0]" in out.stdout and "variable 4.0" in out.stdout


def test_flowgraph_client_runs_a_graph_on_a_tensorflow_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    server = subprocess.Popen([TF_PYTHON, "-c", TF_SERVER, address], stderr=subprocess.DEVNULL)
    try:
        status = grpc_worker.wait_until_serving(address, timeout=120)
        assert status.device_attributes[0].name == "/job:worker/replica:0/task:0/device:CPU:0"
        with tf.Graph().as_default():
            a = tf.placeholder(tf.float32, [2])
            b = a * 2.0 + 1.0
            v = tf.Variable(3.0)
            with tf.Session(f"grpc://{address}") as sess:
                np.testing.assert_array_equal(sess.run(b, {a: [1.0, 2.0]}), [3.0, 5.0])
                sess.run(v.initializer)
                assert sess.run(v.assign_add(1.0)) == 4.0
    finally:
        server.kill()
        server.wait()

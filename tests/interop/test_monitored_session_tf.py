"""MonitoredTrainingSession leaves on disk what TensorFlow leaves: the same steps run, the same
checkpoints and files, the same event sequence (graph, checkpoint and START logs, summaries at
the same steps), and a second run resumes from the first one's checkpoint as TF's does.

tf_monitored/expected.json is what real TensorFlow printed for tf_monitored/program.py; the
second test re-checks it against TensorFlow where /opt/tfbench is installed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import TF_PYTHON, needs_tf

_HERE = Path(__file__).resolve().parent / "tf_monitored"
_PROGRAM = _HERE / "program.py"
_EXPECTED = json.loads((_HERE / "expected.json").read_text())


def _run(python, which, directory):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [str(python), str(_PROGRAM), which, str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_flowgraph_training_session_matches_tensorflow(tmp_path):
    assert _run(sys.executable, "flowgraph", tmp_path) == _EXPECTED


@needs_tf
def test_expected_file_is_what_tensorflow_prints(tmp_path):
    assert _run(TF_PYTHON, "tf", tmp_path) == _EXPECTED

"""`flowgraph run SCRIPT.py [ARGS]` and `python -m flowgraph`: an unmodified TF1 script runs
with `tensorflow` resolving to flowgraph."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.helpers import run_flowgraph

SCRIPT = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    import tensorflow.compat.v1 as v1
    from tensorflow.compat import v1 as v1b
    import helper  # the script's own directory is on sys.path, as with `python SCRIPT.py`

    assert tf is v1 is v1b, (tf, v1, v1b)
    v1.disable_v2_behavior()
    tf.disable_eager_execution()
    x = v1.placeholder(v1.float32, [None], name="x")
    y = tf.add(tf.multiply(x, 2.0), helper.OFFSET, name="y")
    with v1.Session() as sess:
        out = sess.run(y, feed_dict={x: [float(a) for a in sys.argv[1:]]})
    print("RESULT", out.tolist(), y.name, __name__, sys.argv[0].endswith("model.py"))
    """
)


@pytest.fixture
def script(tmp_path):
    (tmp_path / "helper.py").write_text("OFFSET = 1.0\n")
    path = tmp_path / "model.py"
    path.write_text(SCRIPT)
    return path


def test_run_executes_an_unmodified_tf1_script(script):
    proc = run_flowgraph("run", str(script), "1", "2.5", cwd=script.parent.parent)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [3.0, 6.0] y:0 __main__ True" in proc.stdout


def test_script_exit_status_and_errors_propagate(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport tensorflow\nsys.exit(3)\n")
    assert run_flowgraph("run", str(bad)).returncode == 3
    bad.write_text("import tensorflow as tf\ntf.enable_eager_execution()\n")
    proc = run_flowgraph("run", str(bad))
    assert proc.returncode == 1 and "graph mode only" in proc.stderr


def test_cli_usage_errors(capsys):
    proc = run_flowgraph("run", "/no/such/script.py")  # through `python -m flowgraph` once
    assert proc.returncode == 2 and "no such script: /no/such/script.py" in proc.stderr
    from flowgraph import cli  # the other usage errors in process: no interpreter start each

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["frobnicate"])
    assert exit_info.value.code == 2 and "invalid choice: 'frobnicate'" in capsys.readouterr().err
    assert cli.main([]) == 2 and "run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0 and "run a TF1 script" in capsys.readouterr().out


def test_main_in_process_restores_argv_and_path(script, capsys):
    from flowgraph import cli, compat

    argv, path = list(sys.argv), list(sys.path)
    try:
        assert cli.main(["run", str(script), "0"]) == 0
    finally:
        compat.uninstall_tensorflow_aliases()
        sys.modules.pop("helper", None)
    assert sys.argv == argv and sys.path == path
    assert "RESULT [1.0] y:0 __main__ True" in capsys.readouterr().out

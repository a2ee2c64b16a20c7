"""tf.gfile / tf.io.gfile on a temporary directory, with TF's error classes."""

from __future__ import annotations

import os

import pytest

import flowgraph as tf

gfile = tf.gfile


def test_directories_and_listing(tmp_path):
    root = str(tmp_path / "a")
    gfile.MakeDirs(os.path.join(root, "b", "c"))
    gfile.MakeDirs(os.path.join(root, "b"))  # already there: fine
    gfile.MkDir(os.path.join(root, "d"))
    with pytest.raises(tf.errors.AlreadyExistsError):
        gfile.MkDir(os.path.join(root, "d"))
    with pytest.raises(tf.errors.NotFoundError):
        gfile.MkDir(os.path.join(root, "missing", "x"))
    with gfile.GFile(os.path.join(root, "f.txt"), "w") as f:
        f.write("x")
    assert gfile.IsDirectory(root) and not gfile.IsDirectory(os.path.join(root, "f.txt"))
    assert gfile.ListDirectory(root) == ["b", "d", "f.txt"]
    assert list(gfile.Walk(root)) == [
        (root, ["b", "d"], ["f.txt"]),
        (os.path.join(root, "b"), ["c"], []),
        (os.path.join(root, "b", "c"), [], []),
        (os.path.join(root, "d"), [], []),
    ]
    assert [d for d, _, _ in gfile.Walk(root, in_order=False)][-1] == root
    assert list(gfile.Walk(str(tmp_path / "nope"))) == []
    errors_seen = []
    assert list(tf.io.gfile.walk(str(tmp_path / "nope"), onerror=errors_seen.append)) == []
    assert isinstance(errors_seen[0], tf.errors.NotFoundError)
    with pytest.raises(tf.errors.NotFoundError):
        gfile.ListDirectory(os.path.join(root, "f.txt"))
    gfile.DeleteRecursively(root)
    assert not gfile.Exists(root)
    with pytest.raises(tf.errors.NotFoundError):
        gfile.DeleteRecursively(root)


def test_glob_stat_copy_rename_remove(tmp_path):
    for name in ("x1.txt", "x2.txt", ".hidden.txt", "y.bin"):
        (tmp_path / name).write_bytes(b"12345")
    d = str(tmp_path)
    assert gfile.Glob(os.path.join(d, "x*.txt")) == [
        os.path.join(d, n) for n in ("x1.txt", "x2.txt")
    ]
    assert len(gfile.Glob([os.path.join(d, "*.txt"), os.path.join(d, "*.bin")])) == 4
    assert gfile.Glob(os.path.join(d, "none*")) == []
    st = gfile.Stat(os.path.join(d, "x1.txt"))
    assert st.length == 5 and not st.is_directory and st.mtime_nsec > 0
    assert gfile.Stat(d).is_directory
    src, dst = os.path.join(d, "x1.txt"), os.path.join(d, "x2.txt")
    with pytest.raises(tf.errors.AlreadyExistsError):
        gfile.Copy(src, dst)
    (tmp_path / "x1.txt").write_bytes(b"new")
    gfile.Copy(src, dst, overwrite=True)
    assert (tmp_path / "x2.txt").read_bytes() == b"new"
    with pytest.raises(tf.errors.AlreadyExistsError):
        gfile.Rename(src, dst)
    tf.io.gfile.rename(src, os.path.join(d, "z.txt"))
    assert not gfile.Exists(src) and gfile.Exists(os.path.join(d, "z.txt"))
    gfile.Remove(os.path.join(d, "z.txt"))
    for fn, args in [
        (gfile.Remove, [src]),
        (gfile.Stat, [src]),
        (gfile.Copy, [src, os.path.join(d, "q")]),
        (gfile.Rename, [src, os.path.join(d, "q")]),
    ]:
        with pytest.raises(tf.errors.NotFoundError):
            fn(*args)
    with pytest.raises(tf.errors.FailedPreconditionError):
        gfile.Remove(d)  # a directory


def test_gfile_read_write_modes(tmp_path):
    path = str(tmp_path / "f.txt")
    with gfile.GFile(path, "w") as f:
        f.write("héllo\n")
        f.write(b"line2\r\nlast")
        assert f.size() == len("héllo\n".encode()) + 11
    with gfile.Open(path) as f:
        assert f.readline() == "héllo\n"
        assert f.readline() == "line2\r\n"  # no newline translation
        assert f.tell() == len("héllo\n".encode()) + 7
        assert f.read() == "last"
        assert f.readline() == ""
        f.seek(0)
        assert f.read(1) == "h"
        f.seek(position=0)
        assert f.readlines() == ["héllo\n", "line2\r\n", "last"]
        with pytest.raises(tf.errors.PermissionDeniedError):
            f.write("x")
    with gfile.FastGFile(path, "rb") as f:
        assert list(f) == ["héllo\n".encode(), b"line2\r\n", b"last"]
        assert f.size() == 18 and f.name == path and f.mode == "rb"
    with gfile.GFile(path, "a") as f:
        f.write("!")
        with pytest.raises(tf.errors.PermissionDeniedError):
            f.read()
    with tf.io.gfile.GFile(path, "r+") as f:
        assert f.read().endswith("last!")
        f.write("?")
    assert (tmp_path / "f.txt").read_bytes().endswith(b"last!?")


def test_gfile_errors(tmp_path):
    missing = gfile.GFile(str(tmp_path / "missing.txt"))  # opened lazily, like TF
    with pytest.raises(tf.errors.NotFoundError, match="missing.txt"):
        missing.read()
    never_written = gfile.GFile(str(tmp_path / "empty.txt"), "w")
    never_written.close()
    assert not gfile.Exists(str(tmp_path / "empty.txt"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="mode"):
        gfile.GFile(str(tmp_path / "x"), "rw")
    with pytest.raises(tf.errors.NotFoundError):
        gfile.GFile(str(tmp_path / "no_dir" / "x"), "w").write("x")
    closed = gfile.GFile(str(tmp_path / "c.txt"), "w")
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        closed.write("x")


@pytest.mark.parametrize("path", ["gs://bucket/x", "hdfs://host/path", "s3://b/k"])
def test_non_local_schemes_are_unimplemented(path):
    scheme = path.split(":")[0]
    for fn in (gfile.Exists, gfile.MakeDirs, gfile.GFile, tf.io.gfile.exists, gfile.Glob):
        with pytest.raises(tf.errors.UnimplementedError, match=f"scheme '{scheme}'.*{path}"):
            fn(path)


def test_file_scheme_and_path_objects(tmp_path):
    (tmp_path / "a.txt").write_text("A")
    assert gfile.Exists("file://" + str(tmp_path / "a.txt"))
    assert gfile.Exists(tmp_path / "a.txt") and gfile.Exists(os.fsencode(tmp_path / "a.txt"))
    assert tf.io.gfile.listdir(tmp_path) == ["a.txt"]
    tf.io.gfile.makedirs(tmp_path / "m" / "n")
    tf.io.gfile.rmtree(path=tmp_path / "m")  # the TF2-style argument names
    assert not tf.io.gfile.isdir(path=tmp_path / "m") and tf.io.gfile.exists(path=tmp_path)
    assert tf.io.gfile.glob(pattern=str(tmp_path / "*.txt")) == [str(tmp_path / "a.txt")]
    assert tf.io.gfile.stat(path=tmp_path / "a.txt").length == 1
    tf.io.gfile.copy(src=tmp_path / "a.txt", dst=tmp_path / "b.txt")
    tf.io.gfile.mkdir(path=tmp_path / "d")
    tf.io.gfile.remove(path=tmp_path / "b.txt")
    assert tf.io.gfile.listdir(path=tmp_path) == ["a.txt", "d"]


def test_tensorflow_import_paths():
    from flowgraph import compat

    compat.install_tensorflow_aliases()
    try:
        from tensorflow.python.platform import gfile as tf_gfile
        from tensorflow.python.platform import tf_logging

        assert tf_gfile.Exists is gfile.Exists and tf_logging.info is tf.logging.info
    finally:
        compat.uninstall_tensorflow_aliases()

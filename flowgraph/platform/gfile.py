"""tf.gfile and tf.io.gfile: file access with TensorFlow's error classes (TF's file_io).

Only the local file system is provided: a path with a scheme ("gs://b/x", "hdfs://...") is an
UnimplementedError naming the scheme and the path; "file://" paths are local. Failures raise
TF's classes through one errno table (`_os_error`, TF's ErrnoToCode): a missing file is a
NotFoundError, an existing target an AlreadyExistsError, a directory where a file is needed a
FailedPreconditionError, and so on.

A GFile opens its file on the first read or write, like TF's: `GFile(missing)` succeeds and the
first `read()` raises NotFoundError; a file opened for writing but never written is not created.
Text modes read and write UTF-8 without newline translation; "b" modes use bytes.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import shutil

from flowgraph.core import errors

__all__ = [
    "Copy",
    "DeleteRecursively",
    "Exists",
    "FastGFile",
    "GFile",
    "Glob",
    "IsDirectory",
    "ListDirectory",
    "MakeDirs",
    "MkDir",
    "Open",
    "Remove",
    "Rename",
    "Stat",
    "Walk",
]

_ERRNO_CLASSES = {
    errors.NotFoundError: (errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.ESRCH),
    errors.AlreadyExistsError: (errno.EEXIST,),
    errors.PermissionDeniedError: (errno.EPERM, errno.EACCES, errno.EROFS),
    errors.FailedPreconditionError: (
        errno.ENOTEMPTY,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EBADF,
        errno.EBUSY,
        errno.EPIPE,
        errno.ETXTBSY,
    ),
    errors.ResourceExhaustedError: (
        errno.ENOSPC,
        errno.EMFILE,
        errno.ENFILE,
        errno.EMLINK,
        errno.ENOMEM,
        errno.EDQUOT,
    ),
    errors.OutOfRangeError: (errno.EFBIG, errno.EOVERFLOW, errno.ERANGE),
    errors.InvalidArgumentError: (errno.EINVAL, errno.ENAMETOOLONG, errno.ELOOP),
    errors.UnimplementedError: (errno.ENOSYS, errno.ENOTSUP),
    errors.UnavailableError: (errno.EAGAIN, errno.EINTR),
}
_BY_ERRNO = {code: cls for cls, codes in _ERRNO_CLASSES.items() for code in codes}


def _os_error(e: OSError, path: str) -> errors.OpError:
    """The TF error for an OSError on `path`; anything unlisted is an UnknownError."""
    cls = _BY_ERRNO.get(e.errno, errors.UnknownError)
    return cls(None, None, f"{path}; {e.strerror or e}")


def _local(path) -> str:
    """`path` as a local path string; a non-local scheme is an UnimplementedError."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8")
    if "://" in path:
        scheme = path.split("://", 1)[0]
        if scheme != "file":
            raise errors.UnimplementedError(
                None,
                None,
                f"File system scheme '{scheme}' not implemented (file: '{path}'); "
                "flowgraph's gfile reads and writes local files only",
            )
        path = path[len("file://") :]
    return path


# -- file-system operations (TF 1.15's tf.gfile names) -------------------------------------------
def Exists(filename) -> bool:
    """Whether a file or directory exists at `filename`."""
    return os.path.exists(_local(filename))


def IsDirectory(dirname) -> bool:
    """Whether `dirname` is a directory (False if it does not exist)."""
    return os.path.isdir(_local(dirname))


def MakeDirs(dirname) -> None:
    """Creates `dirname` and any missing parents; an existing directory is fine."""
    path = _local(dirname)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise _os_error(e, path) from None


def MkDir(dirname) -> None:
    """Creates one directory: AlreadyExistsError if it exists, NotFoundError without a parent."""
    path = _local(dirname)
    try:
        os.mkdir(path)
    except OSError as e:
        raise _os_error(e, path) from None


def DeleteRecursively(dirname) -> None:
    """Deletes a directory tree (or a single file); NotFoundError if nothing is there."""
    path = _local(dirname)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except OSError as e:
        raise _os_error(e, path) from None


def Remove(filename) -> None:
    """Deletes one file; NotFoundError if missing, FailedPreconditionError for a directory."""
    path = _local(filename)
    try:
        os.remove(path)
    except OSError as e:
        raise _os_error(e, path) from None


def _check_target(path: str, overwrite: bool) -> None:
    if not overwrite and os.path.exists(path):
        raise errors.AlreadyExistsError(None, None, f"{path}; file already exists")


def Rename(oldname, newname, overwrite=False) -> None:
    """Moves `oldname` to `newname`; an existing `newname` needs overwrite=True."""
    src, dst = _local(oldname), _local(newname)
    _check_target(dst, overwrite)
    try:
        try:
            os.replace(src, dst)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            shutil.move(src, dst)  # across file systems: copy, then delete
    except OSError as e:
        raise _os_error(e, src) from None


def Copy(oldpath, newpath, overwrite=False) -> None:
    """Copies the file `oldpath` to `newpath`; an existing `newpath` needs overwrite=True."""
    src, dst = _local(oldpath), _local(newpath)
    _check_target(dst, overwrite)
    try:
        shutil.copyfile(src, dst)
    except OSError as e:
        raise _os_error(e, src) from None


def Glob(filename) -> list:
    """Sorted paths matching a pattern (or any of a list of patterns): `*`, `?`, `[...]`
    within one path component; hidden files match like any other, as in TF."""
    patterns = [filename] if isinstance(filename, (str, bytes, os.PathLike)) else list(filename)
    found = set()
    for pattern in patterns:
        found.update(_glob.glob(_local(pattern), include_hidden=True))
    return sorted(found)


def ListDirectory(dirname) -> list:
    """The sorted names (not paths) in a directory; NotFoundError if it is not a directory."""
    path = _local(dirname)
    if not os.path.isdir(path):
        raise errors.NotFoundError(None, None, f"Could not find directory {path}")
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        raise _os_error(e, path) from None


def _walk(top, topdown: bool, onerror):
    try:
        listing = ListDirectory(top)
    except errors.NotFoundError as e:
        if onerror is not None:
            onerror(e)
        return
    path = _local(top)
    subdirs = [n for n in listing if os.path.isdir(os.path.join(path, n))]
    files = [n for n in listing if n not in subdirs]
    if topdown:
        yield top, subdirs, files
    for sub in subdirs:
        yield from _walk(os.path.join(path, sub), topdown, onerror)
    if not topdown:
        yield top, subdirs, files


def Walk(top, in_order=True):
    """Yields (dirname, subdir names, file names) for `top` and every directory below it,
    parents first if `in_order`, else children first; nothing if `top` does not exist."""
    return _walk(top, in_order, None)


class FileStatistics:
    """What Stat reports: `length` in bytes, `mtime_nsec`, `is_directory`."""

    def __init__(self, length: int, mtime_nsec: int, is_directory: bool):
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory

    def __repr__(self):
        return (
            f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, "
            f"is_directory={self.is_directory})"
        )


def Stat(filename) -> FileStatistics:
    """Size, modification time and kind of `filename`; NotFoundError if missing."""
    path = _local(filename)
    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(e, path) from None
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(path))


# -- file objects --------------------------------------------------------------------------------
_MODES = {"r": "rb", "w": "wb", "a": "ab", "r+": "r+b", "w+": "w+b", "a+": "a+b"}


class GFile:
    """A file object (TF's GFile/FileIO): read, readline, readlines, iteration, write, seek,
    tell, size, flush, close, and use as a context manager. See the module docstring."""

    def __init__(self, name, mode="r"):
        self._name = _local(name)
        base = mode.replace("b", "", 1) if mode.count("b") == 1 else mode
        if base not in _MODES:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"mode {mode!r} is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+' "
                "(optionally with 'b')",
            )
        self._mode = mode
        self._os_mode = _MODES[base]
        self._binary = "b" in mode
        self._readable = base.startswith("r") or "+" in base
        self._writable = not base.startswith("r") or "+" in base
        self._file = None
        self._closed = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def mode(self) -> str:
        return self._mode

    def _handle(self):
        if self._closed:
            raise ValueError(f"I/O operation on closed file {self._name}")
        if self._file is None:
            try:
                self._file = open(self._name, self._os_mode)  # noqa: SIM115 (closed by close())
            except OSError as e:
                raise _os_error(e, self._name) from None
        return self._file

    def _reader(self):
        if not self._readable:
            raise errors.PermissionDeniedError(None, None, "File isn't open for reading")
        return self._handle()

    def _out(self, data: bytes):
        return data if self._binary else data.decode("utf-8")

    def read(self, n=-1):
        """Up to `n` bytes (all that is left if n is -1), as bytes or UTF-8 text."""
        return self._out(self._reader().read(-1 if n is None or n < 0 else n))

    def readline(self):
        """The next line including its "\\n"; empty at the end of the file."""
        return self._out(self._reader().readline())

    def readlines(self) -> list:
        return [self._out(line) for line in self._reader().readlines()]

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def write(self, file_content) -> None:
        """Writes str (as UTF-8) or bytes, in any mode."""
        if not self._writable:
            raise errors.PermissionDeniedError(None, None, "File isn't open for writing")
        data = (
            file_content.encode("utf-8") if isinstance(file_content, str) else bytes(file_content)
        )
        self._handle().write(data)

    def seek(self, offset=None, whence=0, position=None) -> None:
        """Moves to `offset` relative to the start (whence 0), position (1) or end (2);
        `position` is TF's older name for `offset`."""
        if position is not None:
            if offset is not None:
                raise ValueError("seek: give `offset` or `position`, not both")
            offset = position
        self._handle().seek(0 if offset is None else offset, whence)

    def tell(self) -> int:
        return self._handle().tell()

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        """The file's length in bytes (what was written so far included)."""
        if self._file is not None and self._writable:
            self._file.flush()
        return Stat(self._name).length

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_file", None) is not None:
            self._file.close()


Open = GFile
FastGFile = GFile  # TF1's deprecated unbuffered variant; buffering does not change results


# -- tf.io.gfile: the TF2-style names (and argument names), which TF 1.15 also provides ---------
def copy(src, dst, overwrite=False) -> None:
    Copy(src, dst, overwrite)


def exists(path) -> bool:
    return Exists(path)


def glob(pattern) -> list:
    return Glob(pattern)


def isdir(path) -> bool:
    return IsDirectory(path)


def listdir(path) -> list:
    return ListDirectory(path)


def makedirs(path) -> None:
    MakeDirs(path)


def mkdir(path) -> None:
    MkDir(path)


def remove(path) -> None:
    Remove(path)


def rename(src, dst, overwrite=False) -> None:
    Rename(src, dst, overwrite)


def rmtree(path) -> None:
    DeleteRecursively(path)


def stat(path) -> FileStatistics:
    return Stat(path)


def walk(top, topdown=True, onerror=None):
    """Like Walk; `onerror(error)` is called when a directory cannot be listed."""
    return _walk(top, topdown, onerror)


IO_GFILE = {
    "GFile": GFile,
    "copy": copy,
    "exists": exists,
    "glob": glob,
    "isdir": isdir,
    "listdir": listdir,
    "makedirs": makedirs,
    "mkdir": mkdir,
    "remove": remove,
    "rename": rename,
    "rmtree": rmtree,
    "stat": stat,
    "walk": walk,
}

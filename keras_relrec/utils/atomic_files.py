"""Atomic writes: every file (or folder) the package writes appears whole or
not at all, so that a process killed mid-write leaves the previous version.

`replacing(path)` yields a temporary path beside `path` (same folder, so
the same file system; a hidden name that keeps the suffix, which writers
such as Keras' `model.save` and `np.savez` look at); the body writes it,
and on success it is flushed to disk and `os.replace`d onto `path` (one
atomic rename); on failure it is removed. A folder (a SavedModel) is
swapped in the same way: onto a free name by a rename, onto an existing
folder by exchanging the two atomically (Linux `renameat2`); where the
system lacks that, the old folder is renamed away first, so that a kill
between the two renames leaves no folder at `path` (the old one stays
beside it, under a hidden name). A file never replaces a folder, nor a
folder a file: the swap refuses (`IsADirectoryError`,
`NotADirectoryError`) and leaves the target as it was.

A group of files, `replacing(a, b)`, is replaced in the order given, one
rename each: two renames cannot be one atomic step, so a reader that
needs a pair to match checks it. The pair written by `export_tflite` for
a fixed-batch streaming file (`<name>.tflite` and its
`<name>.initial_state.npz`) is such a unit: the `.npz` records the
SHA-256 of the `.tflite` it belongs to and is replaced first, the
`.tflite` last; the reader (`initial_state_file.read_initial_state`)
refuses a `.npz` whose fingerprint is not the `.tflite`'s. A kill
between the two renames thus leaves the old `.tflite` with a new `.npz`,
which is refused with a clear error, never used as a mix.

A killed writer leaves its temporary file behind (nothing runs after
SIGKILL), under a hidden name (`.<name>.<random>.tmp<suffix>`), never
under the target's.
"""

import contextlib
import ctypes
import ctypes.util
import errno
import os
import pathlib
import secrets
import shutil
import sys

# renameat2's flag that swaps two existing names atomically.
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@contextlib.contextmanager
def replacing(*paths):
    """Yields a temporary path beside each of `paths` (the path alone for
    one, a tuple for several); when the body returns, each replaces its
    target, in the order given; when it raises, they are removed.

    Example:

    ```python
    with replacing("model.keras") as temp:
        model.save(temp)
    ```
    """
    if not paths:
        raise ValueError("Argument `paths` must name at least one file; received none.")
    # A symlink's file is what gets replaced, not the link.
    targets = [pathlib.Path(os.path.realpath(path)) for path in paths]
    # Named here: the body's own error would name the hidden temporary.
    for target in targets:
        if target.parent.exists() and not target.parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(target.parent))
        if not target.parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, "no folder to write into", str(target.parent))
    temps = [target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp{target.suffix}" for target in targets]
    try:
        yield temps[0] if len(temps) == 1 else tuple(temps)
        for temp, target in zip(temps, targets):
            _check_same_kind(temp, target)
            if target.is_file():  # a private file stays private
                shutil.copymode(target, temp)
            _sync(temp)
        for temp, target in zip(temps, targets):
            _replace(temp, target)
    except BaseException:
        for temp in temps:  # those replaced are gone already
            _remove(temp)
        raise
    for folder in {target.parent for target in targets}:
        _sync_folder(folder)


def write_bytes(path, content):
    """Writes `content` (bytes) to `path` atomically."""
    with replacing(path) as temp:
        temp.write_bytes(content)


def write_text(path, text):
    """Writes `text` to `path` atomically."""
    with replacing(path) as temp:
        temp.write_text(text)


def _check_same_kind(temp, target):
    """Refuses to put a folder where a file is, or a file where a folder is:
    the swap would delete what is there."""
    if not target.exists() or temp.is_dir() == target.is_dir():
        return
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder is there, which a file does not replace; remove it or "
                                "write elsewhere", str(target))
    raise NotADirectoryError(errno.ENOTDIR, "a file is there, which a folder does not replace; remove it or "
                             "write elsewhere", str(target))


def _replace(temp, target):
    if not temp.is_dir() or not target.exists():
        os.replace(temp, target)
        return
    if _exchange(temp, target):
        _remove(temp)  # now the old folder
        return
    old = target.parent / f".{target.name}.{secrets.token_hex(4)}.old"
    os.rename(target, old)
    try:
        os.rename(temp, target)
    except OSError:
        os.rename(old, target)
        raise
    _remove(old)


def _exchange(first, second):
    """Swaps two existing paths atomically; False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if not hasattr(libc, "renameat2"):  # glibc before 2.28
        return False
    if libc.renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system cannot
        return False
    raise OSError(error, os.strerror(error), str(second))


def _sync(path):
    """Flushes a written file, or every file of a folder, to disk: a rename
    may reach the disk before the data it names."""
    files = [path] if path.is_file() else [pathlib.Path(root) / name for root, _, names in os.walk(path)
                                          for name in names]
    for file in files:
        # Windows flushes only what is open for writing.
        descriptor = os.open(file, os.O_RDWR if os.name == "nt" else os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _sync_folder(folder):
    """Flushes the renames themselves (a folder's entries); some systems
    cannot open a folder, and then the rename is as durable as they make it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:  # e.g. EINVAL on network file systems, after the rename took
        pass
    finally:
        os.close(descriptor)


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

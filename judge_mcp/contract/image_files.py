"""An image file a stdio caller names (images.read_path), opened without a window between check and use.

The path is made absolute and `..` is taken lexically; it must then lie in one of the JUDGE_MCP_IMAGE_DIRS folders
(spelled as the setting resolved it, or through a path whose folders resolve to it). From there the file is reached
one name at a time, each opened relative to the folder before it (`os.open(..., dir_fd=...)`) with O_NOFOLLOW: a
symbolic link below an allowed folder is refused, never followed, so renaming a subfolder into a link to elsewhere
cannot lead outside. The file itself is opened once, with O_NONBLOCK (a FIFO or a device opens at once instead of
waiting for a writer), and everything else is checked on the open descriptor (fstat: a regular file, within the
size limit) before its bytes are read: what is checked is what is read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

T = TypeVar("T")

_NOFOLLOW, _CLOEXEC = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_CLOEXEC", 0)  # (absent on Windows)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
# Opening each name relative to its folder needs dir_fd (POSIX); elsewhere (Windows, which has no FIFOs in folders)
# the resolved path is opened once and checked on its descriptor the same way.
_WALK = os.open in os.supports_dir_fd and bool(_NOFOLLOW)
OUTSIDE = "is outside the folders listed in JUDGE_MCP_IMAGE_DIRS"
LINKED = (f"{OUTSIDE}, or reaches its file through a symbolic link inside one (links are not followed there: "
          "name the file by its real path)")
NOT_REGULAR = "is not a regular file inside JUDGE_MCP_IMAGE_DIRS"


def _inside(path: str, dirs: tuple[Path, ...]) -> tuple[Path, list[str]] | None:
    """(the allowed folder, the names below it) for the lexically normalised absolute `path`; or None. A folder
    matches as the setting spells it (resolved at start) or, failing that, where one of the path's folders resolves
    to it (a path through a link above the allowed folder, /tmp for /private/tmp): the walk below starts from the
    allowed folder itself either way."""
    parts = Path(path).parts
    for folder in dirs:
        n = len(folder.parts)
        if tuple(parts[:n]) == folder.parts:
            return folder, list(parts[n:])
    for i in range(len(parts), 0, -1):
        real = Path(os.path.realpath(Path(*parts[:i])))
        if real in dirs:
            return real, list(parts[i:])
    return None


def _refused(exc: OSError, name: str, fd: int) -> ValueError:
    """What to say of a name below an allowed folder that did not open (`fd`: the folder it was opened in)."""
    if exc.errno == errno.ENOTDIR:  # a link opened as a folder with O_NOFOLLOW says ENOTDIR: tell it from a file
        try:
            linked = stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
        except OSError:
            linked = False
        return ValueError(LINKED if linked else NOT_REGULAR)
    if exc.errno == errno.ELOOP:
        return ValueError(LINKED)
    if exc.errno in (errno.ENOENT, errno.EISDIR):
        return ValueError(NOT_REGULAR)
    return ValueError(f"cannot be read: {exc.strerror or type(exc).__name__}")


def _open(folder: Path, names: list[str]) -> int:
    """A descriptor of the file `names` leads to from `folder`, no link followed, opened without blocking."""
    fd = os.open(folder, _DIR_FLAGS)  # resolved at start: a link there now is a swap, refused
    try:
        for name in names[:-1]:
            try:
                below = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refused(exc, name, fd) from None
            os.close(fd)
            fd = below
        try:
            return os.open(names[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise _refused(exc, names[-1], fd) from None
    finally:
        os.close(fd)


def _open_resolved(path: str, dirs: tuple[Path, ...]) -> int:
    """Where names cannot be opened relative to a folder: the resolved path, if inside, opened once."""
    resolved = Path(path).resolve()
    if not any(resolved.is_relative_to(folder) and resolved != folder for folder in dirs):
        raise ValueError(f"{OUTSIDE} (after resolving links and '..')")
    try:
        return os.open(resolved, _FILE_FLAGS)
    except OSError as exc:
        raise ValueError(NOT_REGULAR if exc.errno in (errno.ENOENT, errno.EISDIR, errno.EACCES) else f"cannot be read: {exc.strerror}") from None


def read_file(value: str, dirs: tuple[Path, ...], max_bytes: int) -> bytes:
    """The bytes of the regular file `value` names inside one of `dirs` (at most `max_bytes`), or a ValueError
    saying why not (never which files exist outside the folders)."""
    try:
        path = os.path.normpath(os.path.abspath(os.path.expanduser(value)))
        found = _inside(path, dirs)
    except (OSError, ValueError) as exc:
        raise ValueError(f"is not a readable path ({type(exc).__name__})") from None
    if found is None:
        raise ValueError(f"{OUTSIDE} (after resolving '..' and the links above them)")
    if not found[1]:  # the allowed folder itself
        raise ValueError(NOT_REGULAR)
    try:
        fd = _open(*found) if _WALK else _open_resolved(path, dirs)
    except OSError as exc:  # the allowed folder itself is gone, or now a link
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ValueError(LINKED) from None
        raise ValueError(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO, a device, a folder: opened, never read
            raise ValueError(NOT_REGULAR)
        if info.st_size > max_bytes:
            raise ValueError(f"is a file larger than {max_bytes:,} bytes; the limit is {max_bytes:,}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)


async def checked(check: Callable[[], T], policy: Any) -> T:
    """`check()` (an argument model's parse) in a worker thread where `policy` lets an image argument name a file,
    so reading one never holds the event loop; on the loop otherwise (nothing there can block)."""
    if policy.stdio and policy.dirs:
        return await anyio.to_thread.run_sync(check)
    return check()

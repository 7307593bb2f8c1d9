"""Opening a path the user named: only regular files, never waiting on one.

A path may name a FIFO (opening it blocks until a writer comes), a device (``/dev/zero`` reads
forever, ``/dev/tty`` waits for input), a socket or a directory, often behind a symlink with an
innocent name. Every place that opens a user's path (the CLI, the Studio's open/drop/reload,
external weights, ``--input`` files, peer formats) goes through :func:`open_regular`: the file is
opened without blocking, ``fstat`` of the open descriptor (not of the name, which may change in
between) must say "regular file", and only then is the descriptor made blocking again.
"""
from __future__ import annotations

import os
import stat

from .errors import NacFormatError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path, *, buffering: int = -1, section: str = "file"):
    """``open(path, "rb")`` for a regular file; anything else raises :class:`NacFormatError`
    naming what the path is (a missing or unreadable file raises ``OSError`` as ``open`` does)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NacFormatError(section, 0, f"{os.fspath(path)} is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def check_regular(path, *, section: str = "file") -> None:
    """Refuse a path that is not a regular file, without opening it (for a library that opens the
    path itself, such as safetensors). ``OSError`` when it does not exist."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NacFormatError(section, 0, f"{os.fspath(path)} is {kind_of(mode)}, not a regular file")

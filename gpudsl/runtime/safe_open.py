"""Reading what gpudsl loads (compiled code, pickles) without a race against other users.

A check on a path followed by a load of the same path reads whatever the path names at
the second moment: anyone who can write a folder on the way can flip a link between
the two.  So a folder is opened one name at a time without following links (a link is
read and followed by hand), and every folder passed through is checked on the open
descriptor (``fstat``): it is owned by the current user or by root, and neither its
group nor others may write it unless it has the sticky bit (``/tmp``), as pip and
ssh check the folders above a private one.  The folder itself and each file read from
it must be the current user's and writable by nobody else; a file is opened without
following links, checked on its descriptor and read through it, and the caller uses
exactly those bytes.

Where the system has no owners or no ``dir_fd`` (Windows) nothing is checked and files
are read by name.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

CHECKED = hasattr(os, "geteuid") and os.open in os.supports_dir_fd
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted under an entry's name must not block the open
_FILE = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
_MAX_LINKS = 40


class Untrusted(Exception):
    """Why a folder or file must not be loaded from (another user may write it)."""


def check(st: os.stat_result, name, above: bool = False) -> None:
    """Raise :class:`Untrusted` unless ``st`` (of ``name``) is the current user's and
    writable by nobody else; with ``above`` (a folder on the way to the one read) root
    may own it and others may write it when it is sticky."""
    me = os.geteuid()
    if st.st_uid != me and not (above and st.st_uid == 0):
        raise Untrusted(f"{name} is owned by another user (uid {st.st_uid})")
    if st.st_mode & 0o022 and not (above and st.st_mode & stat.S_ISVTX):
        raise Untrusted(f"{name} is writable by its group or by others "
                        f"(mode {stat.S_IMODE(st.st_mode):o})")


def _names(path: str) -> list[str]:
    return [n for n in path.split("/") if n not in ("", ".")]


def open_dir(path: str | os.PathLike) -> int:
    """A descriptor of the folder ``path``, every folder on the way checked as said above
    (links followed by hand, each from a checked folder).  Raises :class:`Untrusted`, or
    OSError (e.g. FileNotFoundError) when it cannot be opened."""
    path = os.path.join(os.getcwd(), os.fspath(path))
    todo = _names(path)[::-1]
    fd, where, links = os.open("/", DIR_FLAGS), "/", 0
    try:
        while todo:
            name = todo.pop()
            check(os.fstat(fd), where, above=True)
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise
                target = _readlink(name, fd, e)
                links += 1
                if links > _MAX_LINKS:
                    raise OSError(errno.ELOOP, "too many links", path) from None
                if target.startswith("/"):
                    os.close(fd)
                    fd, where = os.open("/", DIR_FLAGS), "/"
                todo += _names(target)[::-1]
                continue
            os.close(fd)
            fd, where = nfd, os.path.normpath(os.path.join(where, name))
        check(os.fstat(fd), where)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _readlink(name: str, dir_fd: int, err: OSError) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        raise err from None  # not a link: a file where a folder was expected


def read_at(dir_fd: int, name: str, where: str | os.PathLike = "") -> bytes:
    """The bytes of the file ``name`` in the folder ``dir_fd`` (opened by
    :func:`open_dir`), opened without following a link, checked on its descriptor (the
    user's, writable by nobody else, a regular file) and read through it.  Raises
    :class:`Untrusted` or OSError."""
    fd = os.open(name, _FILE, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        shown = os.path.join(where, name)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"{shown} is not a regular file")
        check(st, shown)
        os.set_blocking(fd, True)
        chunks = []
        while True:
            chunk = os.read(fd, max(st.st_size, 1 << 16))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def untrusted(path: str | os.PathLike, _links: int = 0) -> str | None:
    """Why ``path`` (a folder, or a file in a folder checked as the folder read) must not
    be loaded from, or None when it is trusted or absent (see the module's text)."""
    if not CHECKED:
        return None
    p = Path(os.path.join(os.getcwd(), os.fspath(path)))
    try:
        try:
            os.close(open_dir(p))
            return None
        except NotADirectoryError:  # a file
            pass
        fd = open_dir(p.parent)
        try:
            st = os.stat(p.name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and _links < _MAX_LINKS:
                return untrusted(p.parent / os.readlink(p.name, dir_fd=fd), _links + 1)
            check(st, p)
        finally:
            os.close(fd)
    except Untrusted as e:
        return str(e)
    except OSError:
        return None
    return None

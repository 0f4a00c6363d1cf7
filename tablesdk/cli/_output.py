"""Where a command's output file goes, and the rules every writer of the command line follows.

Nothing that was at the output path is destroyed before the command succeeds:

- A regular file (new or existing) is written *beside* the path: a new file in the same
  directory, created exclusively under a name of its own, renamed onto the path only once
  the command is done. A failed command removes that new file and nothing else.
- A path that exists is replaced only when the command was given ``--overwrite``; the new
  file keeps the old one's permission bits. Without it the command refuses before writing
  anything, and a file that appears at the path while the command runs is not replaced either.
- A symbolic link is followed: the file it points to is the one written (beside that file,
  then renamed onto it), so the link itself stays as it is; ``--overwrite`` is needed when
  that file exists. Nothing is ever truncated or removed through a link.
- ``-`` (stdout) and a path that is not a regular file (a character device such as
  ``/dev/null``, a FIFO) are written as a stream: opened for writing without truncating
  it, never created, replaced or removed. What cannot be written as a stream (a resumed
  export, which keeps its state next to a file) refuses such a path.

:func:`output_path` checks a path against these rules; :func:`written_file` is the context
manager a one-pass writer uses; the resumable export uses the same :class:`OutputPath`'s
:meth:`~OutputPath.beside` and :meth:`~OutputPath.install` across runs.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

__all__ = ["OVERWRITE_OPTION", "OutputFileError", "OutputPath", "new_directory_beside", "output_path",
           "replace_small_file", "written_file"]

#: The option that lets a command replace an existing file.
OVERWRITE_OPTION = "--overwrite"


#: Why a file cannot be created in a directory: it is missing, not ours to write, or read-only.
_CANNOT_CREATE = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR})


class OutputFileError(ValueError):
    """An output path a command will not write (it exists, it is a directory, its directory is read-only)."""


def _unwritable(directory: str, error: OSError) -> OutputFileError:
    return OutputFileError(
        f"cannot write in {directory or '.'} ({error.strerror or error}): the output is written beside "
        "its path and renamed into place, so its directory must be writable; nothing was changed"
    )


@dataclass(frozen=True)
class OutputPath:
    """An output path checked against the rules of this module.

    ``given`` is the path as the user wrote it; ``path`` is the file that is written (the
    same, or the file a symbolic link points to); ``stream`` is true for ``-`` and for a
    path that is not a regular file.
    """

    given: str
    path: str
    stream: bool
    overwrite: bool
    #: The permission bits of the file being replaced (kept by the new one), if any.
    mode: int | None = None

    def beside(self, suffix: str) -> tuple[IO[bytes], str]:
        """A new, empty file next to :attr:`path` (opened for reading and writing) and its name."""
        directory, name = os.path.split(self.path)
        while True:
            candidate = os.path.join(directory, f"{name}.{os.urandom(4).hex()}{suffix}")
            try:
                # O_EXCL: never an existing file, nor through a link planted under the name.
                fd = os.open(candidate, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno in _CANNOT_CREATE:
                    raise _unwritable(directory, exc) from None
                raise
            return os.fdopen(fd, "w+b"), candidate

    def install(self, temporary: str, *, replace: bool | None = None) -> None:
        """Rename ``temporary`` (made by :meth:`beside`) onto :attr:`path`.

        It replaces a file there only with ``--overwrite`` (``replace`` says otherwise);
        without it a file that appeared meanwhile raises :class:`OutputFileError` and
        ``temporary`` stays where it is.
        """
        if self.overwrite if replace is None else replace:
            if self.mode is not None:
                os.chmod(temporary, self.mode)
            os.replace(temporary, self.path)
            return
        try:
            os.link(temporary, self.path)  # atomic, and fails when anything is at the path
        except FileExistsError:
            raise OutputFileError(
                f"{self.given} appeared while the command ran; it was left as it is: "
                f"run again with {OVERWRITE_OPTION} to replace it"
            ) from None
        except OSError:  # a file system without hard links: check, then rename
            if os.path.lexists(self.path):
                raise OutputFileError(f"{self.given} appeared while the command ran; it was left as it is") from None
            os.replace(temporary, self.path)
            return
        os.unlink(temporary)

    def open_stream(self) -> IO[bytes]:
        """The stream target opened for writing: stdout for ``-``; a device or FIFO without truncating it."""
        if self.given == "-":
            return sys.stdout.buffer
        fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))  # no O_CREAT, no O_TRUNC
        return os.fdopen(fd, "wb")

    def close_stream(self, stream: IO[bytes]) -> None:
        """Flush ``stream``, and close it unless it is stdout."""
        if stream is sys.stdout.buffer:
            stream.flush()
        elif not stream.closed:
            stream.close()


def output_path(given: str, *, overwrite: bool, directory: bool = False) -> OutputPath:
    """``given`` checked against the rules of this module (see there); :class:`OutputFileError` when
    it is refused. With ``directory`` the output is a new directory: ``given`` must not exist, or
    be an empty directory (which is replaced)."""
    if given == "-":
        return OutputPath(given, given, stream=True, overwrite=overwrite)
    path = os.path.realpath(given) if os.path.islink(given) else given
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return OutputPath(given, path, stream=False, overwrite=overwrite)
    if directory:
        if not stat.S_ISDIR(info.st_mode):
            raise OutputFileError(f"{given} exists and is not a directory: this export writes a directory; "
                                  "name a new one")
        if os.listdir(path):
            raise OutputFileError(f"{given} is a directory with files in it: this export writes a new directory "
                                  "(one file per range); name a new one, or empty this one")
        return OutputPath(given, path, stream=False, overwrite=overwrite)
    if stat.S_ISDIR(info.st_mode):
        raise OutputFileError(f"{given} is a directory: name a file to write")
    if not stat.S_ISREG(info.st_mode):
        if stat.S_ISSOCK(info.st_mode):
            raise OutputFileError(f"{given} is a socket: name a file, a device or a FIFO to write")
        return OutputPath(given, path, stream=True, overwrite=overwrite)
    if not overwrite:
        raise OutputFileError(f"{given} exists: pass {OVERWRITE_OPTION} to replace it "
                              "(it is replaced only once the command succeeds)")
    return OutputPath(given, path, stream=False, overwrite=True, mode=stat.S_IMODE(info.st_mode))


def new_directory_beside(output: OutputPath, suffix: str) -> str:
    """A new, empty directory next to ``output.path`` (renamed onto it by the caller on success)."""
    parent, name = os.path.split(output.path)
    while True:
        candidate = os.path.join(parent, f"{name}.{os.urandom(4).hex()}{suffix}")
        try:
            os.mkdir(candidate, 0o777)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno in _CANNOT_CREATE:
                raise _unwritable(parent, exc) from None
            raise
        return candidate


def replace_small_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a file of the command's own, such as a resume state)."""
    output = OutputPath(path, path, stream=False, overwrite=True)
    handle, temporary = output.beside(".tmp")
    try:
        with handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


@contextmanager
def written_file(given: str, *, overwrite: bool, keep_on_failure: bool = False) -> Iterator[IO[bytes]]:
    """The file a one-pass command writes at ``given``, under the rules of this module.

    The file is renamed into place when the block ends without an error. With
    ``keep_on_failure`` (a report, such as an import's rejects) what was written is
    also put in place when the block fails, but only where nothing was at the path.
    """
    output = output_path(given, overwrite=overwrite)
    if output.stream:
        stream = output.open_stream()
        try:
            yield stream
        finally:
            output.close_stream(stream)
        return
    handle, temporary = output.beside(".tablesdk-tmp")
    try:
        with handle:
            yield handle
        output.install(temporary)
    except BaseException:
        try:
            if keep_on_failure and os.path.exists(temporary) and not os.path.lexists(output.path):
                output.install(temporary, replace=False)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
        raise

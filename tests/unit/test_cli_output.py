"""The rules every file the command line writes follows (tablesdk/cli/_output.py, docs/cli.md).

Each case is made inside the test's own directory: a regular file, a symbolic link, a
FIFO, a character device (as root only: a copy of /dev/null's numbers, never the
machine's own) and a read-only directory. A command that fails is played by an
exception raised inside :func:`written_file`'s block.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import refuse_creation_in
from tablesdk.cli._output import OutputFileError, output_path, written_file

OLD = b"what the user had before\n"


class Failed(Exception):
    """The command failing half-way."""


def fail_while_writing(path: Path, *, overwrite: bool = True) -> None:
    with pytest.raises(Failed):
        with written_file(str(path), overwrite=overwrite) as out:
            out.write(b"half of the new output")
            out.flush()
            raise Failed


def write(path: Path, data: bytes = b"new output\n", *, overwrite: bool = True) -> None:
    with written_file(str(path), overwrite=overwrite) as out:
        out.write(data)


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_a_failure_leaves_an_existing_file_byte_identical(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(OLD)
    fail_while_writing(target)
    assert target.read_bytes() == OLD and listing(tmp_path) == ["out.jsonl"]


def test_a_failure_leaves_no_file_where_there_was_none(tmp_path: Path) -> None:
    fail_while_writing(tmp_path / "out.jsonl", overwrite=False)
    assert listing(tmp_path) == []


def test_success_replaces_the_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(OLD)
    target.chmod(0o640)
    write(target)
    assert target.read_bytes() == b"new output\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert listing(tmp_path) == ["out.jsonl"]


def test_an_existing_file_is_refused_without_overwrite_naming_the_option(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(OLD)
    with pytest.raises(OutputFileError, match="out.jsonl exists: pass --overwrite to replace it"):
        write(target, overwrite=False)
    assert target.read_bytes() == OLD and listing(tmp_path) == ["out.jsonl"]


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with pytest.raises(OutputFileError, match="appeared while the command ran.*--overwrite"):
        with written_file(str(target), overwrite=False) as out:
            out.write(b"new output\n")
            target.write_bytes(OLD)  # another program wrote the path while the command ran
    assert target.read_bytes() == OLD and listing(tmp_path) == ["out.jsonl"]


@pytest.fixture
def link(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    real = tmp_path / "data" / "real.jsonl"
    real.parent.mkdir()
    real.write_bytes(OLD)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    yield link, real


def test_a_failure_through_a_symlink_leaves_the_link_and_its_file(link: tuple[Path, Path], tmp_path: Path) -> None:
    path, real = link
    fail_while_writing(path)
    assert path.is_symlink() and os.readlink(path) == str(real) and real.read_bytes() == OLD
    assert listing(tmp_path) == ["data", "link.jsonl"] and listing(real.parent) == ["real.jsonl"]


def test_a_symlink_is_followed_the_link_stays_and_its_file_is_replaced(link: tuple[Path, Path]) -> None:
    path, real = link
    with pytest.raises(OutputFileError, match="--overwrite"):  # the file the link points to exists
        write(path, overwrite=False)
    assert real.read_bytes() == OLD
    write(path)
    assert path.is_symlink() and os.readlink(path) == str(real) and real.read_bytes() == b"new output\n"
    assert listing(real.parent) == ["real.jsonl"]  # written beside the real file, renamed onto it


def test_a_dangling_symlink_gets_its_file(tmp_path: Path) -> None:
    path, real = tmp_path / "link.jsonl", tmp_path / "real.jsonl"
    path.symlink_to(real)
    write(path, overwrite=False)
    assert path.is_symlink() and real.read_bytes() == b"new output\n"


def test_a_fifo_is_written_as_a_stream_and_never_removed(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there: the writer's open does not block
    try:
        assert output_path(str(fifo), overwrite=False).stream  # no --overwrite needed: nothing is replaced
        fail_while_writing(fifo, overwrite=False)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and listing(tmp_path) == ["pipe"]
        write(fifo, overwrite=False)
        assert os.read(reader, 1000) == b"half of the new outputnew output\n"
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and listing(tmp_path) == ["pipe"]
    finally:
        os.close(reader)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_is_written_as_a_stream_and_never_removed(tmp_path: Path) -> None:
    null = os.stat("/dev/null")  # only its numbers: the node written is a copy inside tmp_path
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, null.st_rdev)
    fail_while_writing(device, overwrite=False)
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == null.st_rdev and listing(tmp_path) == ["null"]
    write(device, overwrite=False)
    assert stat.S_ISCHR(os.lstat(device).st_mode) and listing(tmp_path) == ["null"]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputFileError, match="is a directory"):
        write(tmp_path, overwrite=True)


def test_a_read_only_directory_is_a_clear_error_and_nothing_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    target = directory / "out.jsonl"
    target.write_bytes(OLD)
    directory.chmod(0o555)
    if os.geteuid() == 0:  # root writes in a 0555 directory: the file system's answer to anyone else is played
        refuse_creation_in(directory, monkeypatch)
    try:
        with pytest.raises(OutputFileError, match=r"cannot write in .*ro \(Permission denied\).*nothing was changed"):
            write(target, overwrite=True)
        assert target.read_bytes() == OLD and listing(directory) == ["out.jsonl"]
    finally:
        directory.chmod(0o755)

"""What ``tablesdk export`` (and the rejects file of import) does to what was at its output path.

A failed command leaves it as it was: an existing file byte for byte, a symbolic link
and the file it points to, a FIFO or a device (a copy of /dev/null's numbers made in
the test's own directory, as root only). The export fails half-way because the
service answers 503 ServerBusy once some query pages went out (``--retries 0``); the
command runs in-process through click's runner against the bundled emulator.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from support import refuse_creation_in
from tablesdk import CloudStorageAccount, DynamicEntity
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender
from tablesdk.cli._app import _HINTS_BY_CODE, _HINTS_BY_STATUS, cli, describe_error, options_named
from tablesdk.cli._options import Settings, TablesdkCommand
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

TABLE = "outputfiles"
OLD = b"what the user had before\n"
FORMATS = [("out.jsonl", []), ("out.csv", []), ("out.parquet", []), ("out.jsonl", ["--parallel", "2"])]


@pytest.fixture(scope="module")
def store() -> Iterator[str]:
    """The emulator with pages of 20 entities and a table of 100 over five partitions."""
    with DevStore(port=0, page_size=20) as devstore:
        client = CloudStorageAccount.parse(devstore.connection_string).create_cloud_table_client()
        client.create_table(TABLE)
        entities = [DynamicEntity(PartitionKey=f"p{i % 5}", RowKey=f"{i:03d}", N=i) for i in range(100)]
        client.bulk_insert(TABLE, entities).raise_on_error()
        client.close()
        yield devstore.connection_string


class BusyAfter:
    """A sender that passes ``pages`` query requests to the real one, then answers every query 503 ServerBusy."""

    def __init__(self, inner: Any, pages: int) -> None:
        self.inner, self.pages = inner, pages

    def send(self, request: HttpRequest, timeout: Any) -> HttpResponse:
        if request.method == "GET" and "()" in request.url:
            self.pages -= 1
            if self.pages < 0:
                body = json.dumps({"odata.error": {"code": "ServerBusy", "message": {"value": "Busy."}}})
                return MockSender.response(503, body, {"x-ms-error-code": "ServerBusy",
                                                       "Content-Type": "application/json"})
        answer: HttpResponse = self.inner.send(request, timeout)
        return answer

    def close(self) -> None:
        self.inner.close()


def export(store: str, monkeypatch: pytest.MonkeyPatch, *args: str, fail_after: int | None = None) -> Result:
    """``tablesdk --retries 0 export TABLE ARGS``; with ``fail_after``, the service is busy after that many pages."""
    make_client = Settings.client

    def failing_client(self: Settings, *a: Any, **k: Any) -> Any:
        client = make_client(self, *a, **k)
        assert fail_after is not None
        client.transport._sender = BusyAfter(client.transport._sender, fail_after)
        return client

    with pytest.MonkeyPatch.context() as patch:
        if fail_after is not None:
            patch.setattr(Settings, "client", failing_client)
        return CliRunner().invoke(cli, ["--retries", "0", "export", TABLE, *args],
                                  env={"AZURE_STORAGE_CONNECTION_STRING": store})


def failed(result: Result) -> str:
    assert result.exit_code == 1, result.output
    return result.output


@pytest.mark.parametrize("pages", [0, 2])  # before the first page, and after some
@pytest.mark.parametrize("name, extra", FORMATS)
def test_a_failed_export_leaves_an_existing_file_byte_identical(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, extra: list[str], pages: int
) -> None:
    target = tmp_path / name
    target.write_bytes(OLD)
    output = failed(export(store, monkeypatch, str(target), "--overwrite", *extra, fail_after=pages))
    assert "503 ServerBusy" in output
    assert target.read_bytes() == OLD
    leftovers = sorted(set(os.listdir(tmp_path)) - {name})
    assert all(".tablesdk-" in left for left in leftovers)  # at most the export's own state, for --resume
    assert not any(left.endswith(".tablesdk-tmp") for left in leftovers)


@pytest.mark.parametrize("pages", [0, 1])
@pytest.mark.parametrize("name, extra", FORMATS[:3])
def test_a_failed_export_through_a_symlink_leaves_the_link_and_its_file(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, extra: list[str], pages: int
) -> None:
    real = tmp_path / "data" / name
    real.parent.mkdir()
    real.write_bytes(OLD)
    link = tmp_path / f"link-{name}"
    link.symlink_to(real)
    failed(export(store, monkeypatch, str(link), "--overwrite", *extra, fail_after=pages))
    assert link.is_symlink() and os.readlink(link) == str(real) and real.read_bytes() == OLD


@pytest.mark.parametrize("name, extra", FORMATS[:3])
def test_an_export_through_a_symlink_replaces_the_file_it_points_to(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, extra: list[str]
) -> None:
    real = tmp_path / "data" / name
    real.parent.mkdir()
    real.write_bytes(OLD)
    link = tmp_path / f"link-{name}"
    link.symlink_to(real)
    assert "--overwrite" in failed(export(store, monkeypatch, str(link), *extra))
    result = export(store, monkeypatch, str(link), "--overwrite", *extra)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() != OLD and os.listdir(real.parent) == [name]


def test_a_successful_export_replaces_the_file_with_overwrite(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(OLD)
    result = export(store, monkeypatch, str(target), "--overwrite")
    assert result.exit_code == 0, result.output
    assert target.read_bytes().count(b"\n") == 100 and os.listdir(tmp_path) == ["out.jsonl"]


@pytest.mark.parametrize("name, extra", FORMATS)
def test_an_existing_file_without_overwrite_is_refused_naming_the_option(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, extra: list[str]
) -> None:
    target = tmp_path / name
    target.write_bytes(OLD)
    output = failed(export(store, monkeypatch, str(target), *extra))
    assert "exists: pass --overwrite to replace it" in output and "--resume" not in output
    assert target.read_bytes() == OLD and os.listdir(tmp_path) == [name]


def test_a_failed_export_to_a_fifo_leaves_the_fifo(store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # pages of 20 entities stay far below the pipe's buffer
    try:
        failed(export(store, monkeypatch, str(fifo), fail_after=0))
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]
        failed(export(store, monkeypatch, str(fifo), fail_after=1))
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]
        assert os.read(reader, 1 << 16).count(b"\n") == 20  # the page read before the failure, streamed
        result = export(store, monkeypatch, str(fifo), "--filter", "N lt 10")
        assert result.exit_code == 0, result.output
        assert os.read(reader, 1 << 16).count(b"\n") == 10 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
        refused = failed(export(store, monkeypatch, str(fifo), "--file-format", "parquet"))
        assert "goes to a regular file" in refused and stat.S_ISFIFO(os.lstat(fifo).st_mode)
        assert os.listdir(tmp_path) == ["pipe"]
    finally:
        os.close(reader)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="making a device node needs root")
def test_a_failed_export_to_a_device_leaves_the_device(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    null = os.stat("/dev/null")  # its numbers only: the node exported to is a copy inside tmp_path
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, null.st_rdev)
    for extra, pages in (([], 0), ([], 1), (["--file-format", "csv"], 0), (["--file-format", "csv"], 1)):
        failed(export(store, monkeypatch, str(device), *extra, fail_after=pages))
        after = os.lstat(device)
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == null.st_rdev and os.listdir(tmp_path) == ["null"]
    assert export(store, monkeypatch, str(device)).exit_code == 0 and stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_read_only_directory_is_a_clear_error_and_nothing_is_removed(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    target = directory / "out.jsonl"
    target.write_bytes(OLD)
    directory.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root may write in a 0555 directory: the refusal anyone else gets is played
            refuse_creation_in(directory, monkeypatch)
        output = failed(export(store, monkeypatch, str(target), "--overwrite"))
        assert "cannot write in" in output and "Permission denied" in output
        assert target.read_bytes() == OLD and os.listdir(directory) == ["out.jsonl"]
    finally:
        directory.chmod(0o755)


def test_a_resumed_export_needs_overwrite_for_an_existing_file_and_keeps_working(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "out.jsonl"
    failed(export(store, monkeypatch, str(target), fail_after=2))
    assert not target.exists() and (tmp_path / "out.jsonl.tablesdk-resume").exists()
    target.write_bytes(OLD)  # a file appears at the path before the export is resumed
    assert "--overwrite" in failed(export(store, monkeypatch, str(target), "--resume"))
    assert target.read_bytes() == OLD
    result = export(store, monkeypatch, str(target), "--resume", "--overwrite")
    assert result.exit_code == 0, result.output
    lines = target.read_bytes().splitlines()
    assert len(lines) == len(set(lines)) == 100 and os.listdir(tmp_path) == ["out.jsonl"]


@pytest.mark.parametrize("name", ["out.jsonl", "out.csv"])
def test_a_file_that_appears_during_the_export_is_not_replaced_and_resume_finishes(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    target = tmp_path / name

    class WritesTheTarget:
        """Passes every request on; another program writes the target while the first page is read."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def send(self, request: HttpRequest, timeout: Any) -> HttpResponse:
            if not target.exists():
                target.write_bytes(OLD)
            answer: HttpResponse = self.inner.send(request, timeout)
            return answer

        def close(self) -> None:
            self.inner.close()

    make_client = Settings.client

    def client(self: Settings, *a: Any, **k: Any) -> Any:
        made = make_client(self, *a, **k)
        made.transport._sender = WritesTheTarget(made.transport._sender)
        return made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Settings, "client", client)
        result = CliRunner().invoke(cli, ["export", TABLE, str(target)], env={"AZURE_STORAGE_CONNECTION_STRING": store})
    assert "appeared while the export ran" in failed(result) and "--resume --overwrite" in result.output
    assert target.read_bytes() == OLD
    result = export(store, monkeypatch, str(target), "--resume", "--overwrite")
    assert result.exit_code == 0, result.output
    assert target.read_bytes().count(b"\n") == 100 + name.endswith(".csv") and os.listdir(tmp_path) == [name]


def test_resume_truncates_only_its_own_rows_file_never_through_a_link(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "out.jsonl"
    failed(export(store, monkeypatch, str(target), fail_after=2))
    state_path = tmp_path / "out.jsonl.tablesdk-resume"
    state = json.loads(state_path.read_text())
    other = tmp_path / "other.txt"
    other.write_bytes(OLD * 100)
    rows = tmp_path / state["rows"]
    rows.unlink()
    rows.symlink_to(other)  # the rows file replaced by a link to another file
    failed(export(store, monkeypatch, str(target), "--resume"))
    assert other.read_bytes() == OLD * 100 and not target.exists()
    state_path.write_text(json.dumps({**state, "rows": "other.txt"}))  # a state naming a file not its own
    assert "names no rows file of this export" in failed(export(store, monkeypatch, str(target), "--resume"))
    assert other.read_bytes() == OLD * 100


# ---------------------------------------------------------------- --parallel Parquet: the directory


def test_a_failed_parallel_parquet_export_leaves_no_directory(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "out.parquet"
    output = failed(export(store, monkeypatch, str(target), "--parallel", "2", fail_after=3))
    assert os.listdir(tmp_path) == []
    assert "--workers" not in output  # export has no --workers (it has --parallel)
    existing = tmp_path / "empty.parquet"
    existing.mkdir()
    failed(export(store, monkeypatch, str(existing), "--parallel", "2", fail_after=3))
    assert os.listdir(tmp_path) == ["empty.parquet"] and os.listdir(existing) == []  # it was there: it stays
    result = export(store, monkeypatch, str(existing), "--parallel", "2")
    assert result.exit_code == 0, result.output
    assert existing.is_dir() and all(name.startswith("part-") for name in os.listdir(existing))
    assert os.listdir(tmp_path) == ["empty.parquet"]


# ---------------------------------------------------------------- hints name options the command has


def _commands() -> Iterator[tuple[str, TablesdkCommand]]:
    for name, command in cli.commands.items():
        if isinstance(command, TablesdkCommand):
            yield name, command
        for sub_name, sub in getattr(command, "commands", {}).items():
            if isinstance(sub, TablesdkCommand):
                yield f"{name} {sub_name}", sub


def test_every_hint_names_only_options_of_the_command_that_failed() -> None:
    from tablesdk import TableServiceError

    from tablesdk._core._errors import ConnectionFailedError

    errors: list[Exception] = [TableServiceError("m", status_code=400, error_code=code) for code in _HINTS_BY_CODE]
    errors += [TableServiceError("m", status_code=status) for status in _HINTS_BY_STATUS]
    errors.append(ConnectionFailedError("refused"))
    commands = dict(_commands())
    assert {"export", "import", "copy", "insert", "tables create"} <= set(commands)
    for name, command in commands.items():
        options = command.option_names()
        for error in errors:
            named = options_named(describe_error(error, options))
            assert named <= options, f"{name}: {describe_error(error, options)!r} names {named - options}"
    export_options = commands["export"].option_names()
    busy = TableServiceError("m", status_code=503, error_code="ServerBusy")
    assert "--parallel" in describe_error(busy, export_options)
    assert "--workers" in describe_error(busy, commands["import"].option_names())
    assert not options_named(describe_error(busy))  # no command known: no option suggested


def test_a_missing_table_suggests_create_table_only_where_it_exists(
    store: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["export", "nosuchtable", str(tmp_path / "o.parquet"), "--parallel", "2"],
                                env={"AZURE_STORAGE_CONNECTION_STRING": store})
    output = failed(result)
    assert "TableNotFound" in output and "--create-table" not in output and "tables create" in output
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- the rejects file of import


def test_an_existing_rejects_file_is_refused_before_anything_is_done(store: str, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"PartitionKey":"a","RowKey":"1"}\n')
    rejects = tmp_path / "rejects.jsonl"
    rejects.write_bytes(OLD)
    env = {"AZURE_STORAGE_CONNECTION_STRING": store}
    result = CliRunner().invoke(cli, ["import", str(source), "newtable", "--create-table", "--rejects", str(rejects)],
                                env=env)
    assert "rejects.jsonl exists: pass --overwrite" in failed(result)
    assert rejects.read_bytes() == OLD
    client = CloudStorageAccount.parse(store).create_cloud_table_client()
    assert not client.table_exists("newtable")  # refused before the table was created
    result = CliRunner().invoke(cli, ["import", str(source), TABLE, "--rejects", str(rejects), "--overwrite",
                                      "--mode", "insert"], env=env)
    assert result.exit_code == 0, result.output
    assert rejects.read_bytes() == b"" and sorted(os.listdir(tmp_path)) == ["in.jsonl", "rejects.jsonl"]
    client.delete_entity(TABLE, partition_key="a", row_key="1", etag="*")
    client.close()

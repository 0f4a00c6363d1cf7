"""Connection options before or after the command, the two format options, the query grid's cap, CSV rows."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tablesdk import CloudStorageAccount
from tablesdk._entities._edm import EdmType, EntityPayload
from tablesdk.cli import _export, _transfer
from tablesdk.cli._app import cli, entities_text
from tablesdk.cli._files import pad_csv_rows, read_csv
from tablesdk.cli._options import Settings

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class FakeClient:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def table_exists(self, name: str) -> bool:
        return True


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """The settings each command made its client from (no client is made, nothing is sent)."""
    made: list[Settings] = []

    def client(self: Settings, *args: Any, **kwargs: Any) -> Any:
        made.append(self)
        return FakeClient(self)

    monkeypatch.setattr(Settings, "client", client)
    return made


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"AZURE_STORAGE_CONNECTION_STRING": ""})


@pytest.mark.parametrize("args", [
    ["--account-name", "acct", "--account-key", KEY, "--wire-format", "atom", "--retries", "0", "tables", "exists", "t"],
    ["tables", "exists", "t", "--account-name", "acct", "--account-key", KEY, "--wire-format", "atom", "--retries", "0"],
    ["--account-name", "acct", "tables", "exists", "--account-key", KEY, "t", "--wire-format", "atom", "--retries", "0"],
])
def test_connection_options_go_before_or_after_the_command(seen: list[Settings], args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert (settings.account_name, settings.account_key, settings.payload_format, settings.retries) == (
        "acct", KEY, "atom", 0)


def test_an_option_after_the_command_wins_and_every_command_takes_them(seen: list[Settings]) -> None:
    assert invoke("--wire-format", "atom", "tables", "exists", "t", "--dev", "--wire-format", "json").exit_code == 0
    assert seen[0].dev and seen[0].payload_format == "json"
    for command in ("get", "insert", "query", "count", "export", "import", "copy", "delete-entities", "tables list"):
        help_text = invoke(*command.split(), "--help").output
        assert "Connection options (before or after the command)" in help_text and "--sas-token" in help_text
    assert "--dev" not in invoke("serve", "--help").output  # serve passes its options to the emulator


@pytest.mark.parametrize("args", [
    ["--dev", "--deadline", "2.5", "tables", "exists", "t"],
    ["tables", "exists", "t", "--dev", "--deadline", "2.5"],
    ["--deadline", "9", "tables", "exists", "t", "--dev", "--deadline", "2.5"],
])
def test_deadline_goes_before_or_after_the_command_and_reaches_the_client(seen: list[Settings], args: list[str]) -> None:
    assert invoke(*args).exit_code == 0
    (settings,) = seen
    assert settings.deadline == 2.5
    assert Settings().deadline is None  # the default, as the library's: none


def test_settings_give_their_deadline_to_every_client() -> None:
    settings = Settings(dev=True, deadline=2.5)
    try:
        assert settings.client().operation_deadline == 2.5
        other = CloudStorageAccount.development_storage_account()
        assert settings.client(other, "atom").operation_deadline == 2.5  # copy's destination too
    finally:
        settings.close()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_deadline_that_is_no_number_of_seconds_is_a_usage_error(seen: list[Settings], value: str) -> None:
    result = invoke("--dev", "tables", "exists", "t", "--deadline", value)
    assert result.exit_code == 2 and "is not a number of seconds > 0" in result.output
    assert seen == []


def test_a_secret_given_after_the_command_is_redacted_too(seen: list[Settings]) -> None:
    invoke("tables", "exists", "t", "--account-name", "a", "--sas-token", "sv=1&sig=SecretSig%3D")
    assert "SecretSig" not in seen[0].redact("url http://h/t?sv=1&sig=SecretSig%3D and SecretSig=")


def test_the_old_format_spellings_still_work_with_a_warning_on_stderr(seen: list[Settings]) -> None:
    result = CliRunner().invoke(cli, ["--dev", "--format", "atom", "tables", "exists", "t"])
    assert result.exit_code == 0 and seen[0].payload_format == "atom"
    assert "--format is deprecated: use --wire-format" in result.stderr and "deprecated" not in result.stdout
    quiet = CliRunner().invoke(cli, ["--dev", "--wire-format", "atom", "tables", "exists", "t"])
    assert "deprecated" not in quiet.stderr


def test_export_takes_file_format_and_its_old_spelling(monkeypatch: pytest.MonkeyPatch, seen: list[Settings]) -> None:
    formats: list[str] = []
    monkeypatch.setattr(_export, "export_table", lambda client, spec, *a, **k: formats.append(spec.file_format) or 0)
    new = CliRunner().invoke(cli, ["--dev", "export", "T", "out.jsonl", "--file-format", "csv"])
    assert new.exit_code == 0 and "deprecated" not in new.stderr
    old = CliRunner().invoke(cli, ["--dev", "export", "T", "out.jsonl", "--format", "csv"])
    assert old.exit_code == 0 and "export --format is deprecated: use --file-format" in old.stderr
    assert formats == ["csv", "csv"]
    assert "exported 0 entities" in old.stderr


def test_skip_existing_goes_with_insert_mode(seen: list[Settings]) -> None:
    result = invoke("--dev", "import", "-", "T", "--mode", "upsert", "--skip-existing")
    assert result.exit_code == 2 and "--skip-existing goes with --mode insert" in result.output


def test_counts_say_entity_or_entities() -> None:
    assert [entities_text(n) for n in (0, 1, 2)] == ["0 entities", "1 entity", "2 entities"]


# ---------------------------------------------------------------- the query grid


def fake_pages(total: int, page_size: int = 1000) -> Any:
    def pages(client: Any, query: Any, token: Any = None) -> Iterator[tuple[list[EntityPayload], Any]]:
        for start in range(0, total, page_size):
            payloads = [EntityPayload({"PartitionKey": "p", "RowKey": f"{i:06d}", "N": i}, {"N": EdmType.INT32})
                        for i in range(start, min(total, start + page_size))]
            pages.read += len(payloads)  # type: ignore[attr-defined]
            yield payloads, ("next" if start + page_size < total else None)
    pages.read = 0  # type: ignore[attr-defined]
    return pages


@pytest.fixture
def grid_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A real client (its queries are built as usual); the pages come from ``fake_pages``, nothing is sent."""
    from tablesdk import CloudStorageAccount

    client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
    monkeypatch.setattr(Settings, "client", lambda self, *a, **k: client)
    yield
    client.close()


def test_the_grid_shows_the_first_hundred_and_says_how_many_more(
    monkeypatch: pytest.MonkeyPatch, grid_client: None
) -> None:
    pages = fake_pages(100_000)
    monkeypatch.setattr(_transfer, "pages", pages)
    result = CliRunner().invoke(cli, ["--dev", "query", "Blogs", "-o", "table"])
    assert result.exit_code == 0, result.output
    assert "000099" in result.stdout and "000100" not in result.stdout
    assert pages.read <= 2000  # the first page, and at most the one read ahead: not 100,000 rows
    assert "showing 100 of 1000+ entities" in result.stderr and "--output jsonl" in result.stderr


def test_the_grid_limit_is_an_option_and_a_short_result_has_no_note(
    monkeypatch: pytest.MonkeyPatch, grid_client: None
) -> None:
    monkeypatch.setattr(_transfer, "pages", fake_pages(250, page_size=100))
    some = CliRunner().invoke(cli, ["--dev", "query", "Blogs", "-o", "table", "--limit", "120"])
    assert "000119" in some.stdout and "000120" not in some.stdout
    assert "showing 120 of 200+ entities" in some.stderr
    every = CliRunner().invoke(cli, ["--dev", "query", "Blogs", "-o", "table", "--limit", "0"])
    assert "000249" in every.stdout and "showing" not in every.stderr
    monkeypatch.setattr(_transfer, "pages", fake_pages(100))
    exact = CliRunner().invoke(cli, ["--dev", "query", "Blogs", "-o", "table"])
    assert "000099" in exact.stdout and exact.stderr == ""


# ---------------------------------------------------------------- CSV rows


def test_a_csv_row_with_too_few_cells_is_a_reject() -> None:
    text = 'PartitionKey,RowKey,A\r\n"p","1","x"\r\n"p","2"\r\np,3,\r\n'
    read = list(read_csv(io.StringIO(text, newline="")))
    assert [number for number, entity, _ in read if isinstance(entity, ValueError)] == [3]
    assert "2 cells but the header has 3 columns" in str(read[1][1])
    assert read[2][1]["RowKey"] == "3" and "A" not in read[2][1]  # an empty cell: no such property


def test_rows_written_before_a_column_appeared_are_padded() -> None:
    rows = ['"p","1","a"\r\n', '"p","2","line\r\nbreak"\r\n', '"p","3","c","d"\r\n']
    assert list(pad_csv_rows(rows, 5)) == [
        '"p","1","a",,\r\n', '"p","2","line\r\nbreak",,\r\n', '"p","3","c","d",\r\n',
    ]

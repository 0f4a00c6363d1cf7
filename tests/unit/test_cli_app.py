"""The command line in-process, through click's test runner: help, usage errors, redaction, error lines."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from tablesdk.cli._app import Settings, cli, describe_error
from tablesdk._core._errors import ConnectionFailedError, ResourceNotFoundError, TableValidationError

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SAS = "sv=2019-02-02&tn=t&sig=AbC%2Bdef%2Fghi%3D&se=2099-01-01"


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("tables", "get", "insert", "upsert", "merge", "replace", "delete", "query", "count",
                    "export", "import", "copy", "delete-entities", "serve"):
        assert f"  {command} " in result.output
    tables = CliRunner().invoke(cli, ["tables", "--help"])
    assert all(name in tables.output for name in ("list", "create", "delete", "exists"))


def test_usage_errors_exit_2() -> None:
    runner = CliRunner()
    no_account = runner.invoke(cli, ["tables", "list"], env={"AZURE_STORAGE_CONNECTION_STRING": ""})
    assert no_account.exit_code == 2 and "--connection-string" in no_account.output
    both = runner.invoke(cli, ["--account-name", "a", "--account-key", KEY, "--sas-token", SAS, "tables", "list"])
    assert both.exit_code == 2 and KEY not in both.output
    unknown = runner.invoke(cli, ["export", "t", "f", "--format", "xml"])
    assert unknown.exit_code == 2


def test_settings_redact_every_form_of_a_secret() -> None:
    settings = Settings(
        connection_string=f"AccountName=a;AccountKey={KEY}", sas_token="?" + SAS,
        other_connection_strings=["AccountName=b;SharedAccessSignature=sv=1&sig=OtherSig%3D"],
    )
    text = f"key {KEY} sas {SAS} sig AbC+def/ghi= url http://h/t?sig=zzz other OtherSig%3D OtherSig="
    redacted = settings.redact(text)
    for secret in (KEY, "AbC%2Bdef%2Fghi%3D", "AbC+def/ghi=", "zzz", "OtherSig"):
        assert secret not in redacted


def test_error_lines_say_what_to_do() -> None:
    missing = ResourceNotFoundError("The specified resource does not exist.", status_code=404,
                                    error_code="ResourceNotFound")
    assert describe_error(missing).startswith("404 ResourceNotFound: The specified resource does not exist. - check")
    assert "tablesdk serve" in describe_error(ConnectionFailedError("refused"))
    invalid = TableValidationError("RowKey", "keys are at most 1 KiB", "got 2000 bytes")
    assert describe_error(invalid).startswith("invalid input: ") and "fix the value" in describe_error(invalid)


def test_console_script_is_declared() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="tablesdk")
    assert script.value == "tablesdk.cli:main"


def test_bad_entity_json_is_a_usage_error_about_the_option() -> None:
    result = CliRunner().invoke(cli, ["--account-name", "a", "--account-key", KEY, "insert", "t",
                                      "--entity", '{"PartitionKey":"a",'])
    assert result.exit_code == 2
    assert "--entity: not an entity in JSON form: Expecting property name" in result.output
    assert "response" not in result.output


def test_a_mistyped_account_name_fails_in_seconds_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    from test_unresolved_host import dns_failure

    def unresolvable(self: requests.Session, method: str, url: str, **kwargs: Any) -> Any:
        raise dns_failure()  # what requests raises for myacct.table.core.windows.net; nothing is looked up

    slept: list[float] = []
    make_client = Settings.client

    def client_without_sleeping(self: Settings, *args: Any, **kwargs: Any) -> Any:
        client = make_client(self, *args, **kwargs)
        client.transport._sleep = slept.append
        return client

    monkeypatch.setattr(requests.Session, "request", unresolvable)
    monkeypatch.setattr(Settings, "client", client_without_sleeping)
    result = CliRunner().invoke(cli, ["tables", "list", "--account-name", "myacct", "--account-key", KEY])
    assert result.exit_code == 1
    assert sum(slept) < 5  # the short schedule of a refused connection, not 119 s
    line = result.output.strip()
    assert "'myacct.table.core.windows.net' does not resolve" in line and "check the account name / endpoint" in line
    assert KEY not in result.output


def test_hints_fit_the_command_and_the_error() -> None:
    """A bad --etag is not a --filter problem; a 404 from `tables list` is a wrong endpoint, not a
    wrong table name; AtomPub refused says to use JSON."""
    from tablesdk._core._errors import TableServiceError

    bad_etag = TableServiceError("The etag value 'x' specified in one of the request headers is not valid.",
                                 status_code=400, error_code="InvalidInput")
    line = describe_error(bad_etag, frozenset({"--etag"}), "merge")
    assert "--etag" in line and "--filter" not in line and "check the property" not in line
    not_a_table_service = TableServiceError("Not Found", status_code=404)
    listing = describe_error(not_a_table_service, frozenset({"--prefix"}), "tables list")
    assert "table endpoint" in listing and "table name and keys" not in listing
    assert "table name and keys" in describe_error(not_a_table_service, frozenset(), "get")
    atom = TableServiceError("Atom format is not supported.", status_code=415, error_code="AtomFormatNotSupported")
    assert "JSON only" in describe_error(atom, frozenset(), "tables list")


def test_the_failing_command_is_recorded_for_its_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from tablesdk._core._errors import TableServiceError
    from tablesdk.cli import _app

    def refuse(self: object, prefix: str | None = None) -> object:
        raise TableServiceError("Not Found", status_code=404)

    monkeypatch.setattr("tablesdk._clients._client.CloudTableClient.list_tables", refuse)
    result = CliRunner().invoke(_app.cli, ["--dev", "tables", "list"])
    assert result.exit_code == 1 and "table endpoint" in result.output, result.output


def test_parquet_without_pyarrow_says_which_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "tablesdk.cli._parquet", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "pyarrow" else object())
    result = CliRunner().invoke(cli, ["--dev", "export", "T", str(tmp_path / "t.parquet")])
    assert result.exit_code == 1
    assert "Parquet files needs pyarrow: pip install 'pyarrow>=14'" in result.output
    assert "'.[arrow]'" in result.output and "ModuleNotFoundError" not in result.output


def test_tablesdk_dask_without_dask_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    monkeypatch.delitem(sys.modules, "tablesdk.dask", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "dask" else object())
    with pytest.raises(ImportError, match=r"tablesdk.dask needs dask: pip install .*'\.\[dask\]'"):
        importlib.import_module("tablesdk.dask")
    monkeypatch.undo()  # puts the module that loaded with dask back
    assert importlib.import_module("tablesdk.dask").read_table

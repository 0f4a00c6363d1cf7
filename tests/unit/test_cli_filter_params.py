"""``--param NAME[@Edm.Type]=VALUE`` on the commands with ``--filter``: how a value is typed, what is
refused, and each command on the bundled emulator (in-process, through click's test runner)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from tablesdk import CloudStorageAccount, DynamicEntity, EdmType, EntityProperty, TableValidationError
from tablesdk.cli._app import cli
from tablesdk.cli._params import bind_cli_parameters
from tablesdk.devstore import DevStore


@pytest.mark.parametrize(("param", "literal"), [
    ("v=30", "30"),
    ("v=-7", "-7"),
    ("v=3000000000", "3000000000L"),
    ("v=1.5", "1.5"),
    ("v=2e3", "2000.0"),
    ("v=true", "true"),
    ("v=True", "'True'"),
    ("v=007", "'007'"),
    ("v=O'Neil", "'O''Neil'"),
    ("v=", "''"),
    ("v=a=b", "'a=b'"),
    ("v@Edm.String=30", "'30'"),
    ("v@Edm.Int64=5", "5L"),
    ("v@Edm.Double=5", "5.0"),
    ("v@Edm.DateTime=2024-05-01T10:00:00.1234567Z", "datetime'2024-05-01T10:00:00.1234567Z'"),
    ("v@Edm.Guid=12345678-1234-5678-1234-567812345678", "guid'12345678-1234-5678-1234-567812345678'"),
    ("v@Edm.Binary=AP8=", "X'00ff'"),
    ("v@Edm.Boolean=false", "false"),
])
def test_how_a_value_is_typed(param: str, literal: str) -> None:
    assert bind_cli_parameters("X eq @v", [param]) == f"X eq {literal}"


def test_a_value_compared_with_a_key_or_timestamp_takes_its_type() -> None:
    assert bind_cli_parameters("PartitionKey eq @p and RowKey ge @r", ["p=2024", "r=1.5"]) == (
        "PartitionKey eq '2024' and RowKey ge '1.5'"
    )
    assert bind_cli_parameters("Timestamp ge @t", ["t=2024-05-01T00:00:00Z"]) == (
        "Timestamp ge datetime'2024-05-01T00:00:00.0000000Z'"
    )
    # Compared with a key and with another property: no single type, so typed from its text (an
    # Int32 here, which no key is); the type is then the user's to give.
    with pytest.raises(TableValidationError) as caught:
        bind_cli_parameters("PartitionKey eq @p or Year eq @p", ["p=2024"])
    assert caught.value.field == "@p" and "PartitionKey" in str(caught.value)
    assert bind_cli_parameters("PartitionKey eq @p or Year eq @p", ["p@Edm.String=2024"]) == (
        "PartitionKey eq '2024' or Year eq '2024'"
    )


def test_an_injection_attempt_stays_a_literal() -> None:
    assert bind_cli_parameters("Name eq @n", ["n=x' or true or Name eq 'y"]) == (
        "Name eq 'x'' or true or Name eq ''y'"
    )


def test_refusals() -> None:
    with pytest.raises(click.BadParameter, match="NAME=VALUE"):
        bind_cli_parameters("X eq @v", ["v"])
    with pytest.raises(click.BadParameter, match="twice"):
        bind_cli_parameters("X eq @v", ["v=1", "v=2"])
    with pytest.raises(click.BadParameter, match="unknown type"):
        bind_cli_parameters("X eq @v", ["v@Int64=1"])
    with pytest.raises(click.BadParameter, match="not an Edm.Int32"):
        bind_cli_parameters("X eq @v", ["v@Edm.Int32=x"])
    with pytest.raises(TableValidationError) as caught:
        bind_cli_parameters("X eq @v and Y eq @w", ["v=1"])
    assert caught.value.field == "@w"
    with pytest.raises(TableValidationError) as caught:
        bind_cli_parameters("X eq @v", ["v=1", "w=2"])
    assert caught.value.field == "@w"
    with pytest.raises(TableValidationError) as caught:
        bind_cli_parameters(None, ["v=1"])
    assert caught.value.field == "@v"
    assert bind_cli_parameters("X eq 1", []) == "X eq 1"
    assert bind_cli_parameters(None, []) is None


# ---------------------------------------------------------------- the commands


@pytest.fixture()
def account() -> Iterator[str]:
    with DevStore() as store:
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("people")
        client.bulk_insert("people", [
            DynamicEntity(PartitionKey="p", RowKey=f"{n:02d}", Age=20 + n, Name="O'Neil" if n % 2 else "Smith",
                          Big=EntityProperty(n, EdmType.INT64))
            for n in range(20)
        ]).raise_on_error()
        yield store.connection_string


def run(connection_string: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--connection-string", connection_string, *args], catch_exceptions=False)


FILTER = ["--filter", "Age gt @age and Name eq @name", "--param", "age=30", "--param", "name=O'Neil"]
MATCHING = [f"{n:02d}" for n in range(11, 20, 2)]


def test_count_query_export_and_delete_entities_bind_params(account: str, tmp_path: Path) -> None:
    counted = run(account, "count", "people", *FILTER)
    assert counted.exit_code == 0 and counted.output.strip() == str(len(MATCHING))
    queried = run(account, "query", "people", *FILTER, "--output", "jsonl")
    assert [json.loads(line)["RowKey"] for line in queried.output.splitlines()] == MATCHING
    typed = run(account, "count", "people", "--filter", "Big ge @big", "--param", "big@Edm.Int64=15")
    assert typed.output.strip() == "5"
    exported = tmp_path / "out.jsonl"
    assert run(account, "export", "people", str(exported), *FILTER).exit_code == 0
    assert [json.loads(line)["RowKey"] for line in exported.read_text().splitlines()] == MATCHING
    deleted = run(account, "delete-entities", "people", *FILTER, "--yes")
    assert deleted.exit_code == 0
    assert run(account, "count", "people").output.strip() == str(20 - len(MATCHING))


def test_copy_binds_params(account: str) -> None:
    copied = run(account, "copy", "people", "chosen", "--create-table", "--filter", "PartitionKey eq @pk and Age lt @age",
                 "--param", "pk=p", "--param", "age=23")
    assert copied.exit_code == 0, copied.output
    assert run(account, "count", "chosen").output.strip() == "3"


def test_a_missing_or_unused_param_is_an_error_naming_it(account: str) -> None:
    missing = CliRunner().invoke(cli, ["--connection-string", account, "count", "people", "--filter", "Age gt @age"])
    assert missing.exit_code == 1 and "@age" in missing.output and "parameters" in missing.output
    unused = CliRunner().invoke(cli, ["--connection-string", account, "count", "people", *FILTER, "--param", "x=1"])
    assert unused.exit_code == 1 and "@x" in unused.output
    without_filter = CliRunner().invoke(cli, ["--connection-string", account, "count", "people", "--param", "x=1"])
    assert without_filter.exit_code == 1 and "@x" in without_filter.output
    bad = CliRunner().invoke(cli, ["--connection-string", account, "count", "people", "--filter", "A eq @a",
                                   "--param", "a@Edm.Guid=nope"])
    assert bad.exit_code == 2 and "--param" in bad.output
    assert run(account, "count", "people").output.strip() == "20"


def test_the_delete_confirmation_shows_the_bound_filter(account: str) -> None:
    refused = CliRunner().invoke(cli, ["--connection-string", account, "delete-entities", "people", *FILTER],
                                 input="n\n")
    assert "Age gt 30 and Name eq 'O''Neil'" in refused.output
    assert run(account, "count", "people").output.strip() == "20"


def test_a_guid_param_round_trips(account: str) -> None:
    key = uuid.uuid4()
    client = CloudStorageAccount.parse(account).create_cloud_table_client()
    client.insert_entity("people", DynamicEntity(PartitionKey="g", RowKey="1", Id=key))
    found = run(account, "count", "people", "--filter", "Id eq @id", "--param", f"id@Edm.Guid={key}")
    assert found.output.strip() == "1"

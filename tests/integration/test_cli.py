"""The ``tablesdk`` command line, run through its real entry point (``python -m tablesdk``).

Round trips (JSON lines and CSV, every EDM type) run against every integration
target: the bundled emulator in both wire formats and Azurite. The other
commands run against the bundled emulator.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    EdmDateTime,
    EdmType,
    EntityProperty,
    TableServiceError,
)
from tablesdk._entities._entity import entity_to_payload

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, connection_string: str | None = None, stdin: bytes | None = None,
            env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """``python -m tablesdk ARGS`` in a child process; the account comes from the environment."""
    child_env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
    child_env["PYTHONPATH"] = str(REPO)
    if connection_string is not None:
        child_env["AZURE_STORAGE_CONNECTION_STRING"] = connection_string
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tablesdk", *args], input=stdin, capture_output=True,
        env=child_env, timeout=timeout, check=False,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode("utf-8")


def edm_entities() -> list[DynamicEntity]:
    """Every EDM type, edge values included, over three partitions; some properties absent."""
    seven = EdmDateTime(2024, 2, 29, 23, 59, 59, 123456, timezone.utc, ticks_remainder=7)
    entities = [
        DynamicEntity(
            PartitionKey="p1", RowKey="all",
            S="text with \"quotes\", commas,\nnew lines and unicode é✓", Empty="",
            I32=-(2**31), I32b=2**31 - 1, I64=EntityProperty(5, EdmType.INT64), I64big=-(2**63),
            D=0.1, Dwhole=EntityProperty(2.0, EdmType.DOUBLE), Dnan=math.nan, Dinf=math.inf, Dninf=-math.inf,
            B=True, Bf=False, T=seven, Tmin=datetime(1601, 1, 1, tzinfo=timezone.utc),
            G=uuid.UUID("12345678-1234-5678-1234-567812345678"), Bin=b"\x00\xff\x10binary",
        ),
        DynamicEntity(PartitionKey="p1", RowKey="sparse", S="only this"),
        DynamicEntity(PartitionKey="p2", RowKey="k'ey", I64=EntityProperty(2**40, EdmType.INT64), S=""),
        DynamicEntity(PartitionKey="p3", RowKey="types", S=EntityProperty("7", EdmType.STRING), I32=3),
    ]
    return entities


def comparable(entity: DynamicEntity) -> dict[str, Any]:
    """Name -> (EDM type, value) with NaN made comparable; keys included, Timestamp not."""
    payload = entity_to_payload(entity, validate=False)
    out: dict[str, Any] = {}
    for name, value in payload.values.items():
        edm = payload.types[name]
        if isinstance(value, float):
            value = repr(value)
        if isinstance(value, datetime):
            value = (value.isoformat(), getattr(value, "ticks_remainder", 0))
        out[name] = (edm, value)
    return out


def table_contents(client: CloudTableClient, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e.PartitionKey, e.RowKey): comparable(e) for e in client.create_query(table)}


def fill(client: CloudTableClient, table: str, entities: list[DynamicEntity]) -> None:
    client.bulk_insert(table, entities).raise_on_error()


@pytest.fixture
def second_table(client: CloudTableClient) -> Iterator[str]:
    name = "cli" + uuid.uuid4().hex[:16]
    yield name
    client.delete_table_if_exists(name)


@pytest.fixture
def dev_table(table_client: CloudTableClient, unique_table_name: str) -> str:
    """A fresh table on the bundled emulator (emptied after the test by ``table_client``)."""
    table_client.create_table(unique_table_name)
    return unique_table_name


@pytest.fixture
def dev_env(devstore_connection_string: str) -> dict[str, str]:
    return {"AZURE_STORAGE_CONNECTION_STRING": devstore_connection_string}


def wire_format(target: str) -> str:
    return target.rsplit("-", 1)[1]


# ---------------------------------------------------------------- round trips on every target


@pytest.mark.parametrize("file_format", ["jsonl", "csv"])
def test_export_import_round_trip_is_exact(
    client: CloudTableClient, target: str, connection_string: str, table: str, second_table: str,
    tmp_path: Path, file_format: str,
) -> None:
    fill(client, table, edm_entities())
    path = tmp_path / f"out.{file_format}"
    fmt = ["--format", wire_format(target)]
    ok(run_cli(*fmt, "export", table, str(path), connection_string=connection_string))
    result = run_cli(*fmt, "import", str(path), second_table, "--create-table", connection_string=connection_string)
    ok(result)
    assert b"imported 4 entities, 0 failed" in result.stderr
    assert table_contents(client, second_table) == table_contents(client, table)
    assert table_contents(client, table) == {(e.PartitionKey, e.RowKey): comparable(e) for e in edm_entities()}
    assert not list(tmp_path.glob("*.tablesdk-*"))  # no resume state or row spool left behind


def test_jsonl_export_is_the_services_json_form(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str
) -> None:
    client, table = table_client, dev_table
    fill(client, table, [DynamicEntity(PartitionKey="p", RowKey="1", Big=2**40)])
    out = ok(run_cli("export", table, "-", connection_string=devstore_connection_string))
    assert json.loads(out) == {
        "PartitionKey": "p", "RowKey": "1", "Big": "1099511627776", "Big@odata.type": "Edm.Int64",
    }


def test_csv_headers_carry_types(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str
) -> None:
    client, table = table_client, dev_table
    fill(client, table, [DynamicEntity(PartitionKey="p", RowKey="1", Big=2**40, Name="n")])
    out = ok(run_cli("export", table, "-", "--format", "csv", connection_string=devstore_connection_string))
    assert out.splitlines()[0] == '"PartitionKey","RowKey","Big@Edm.Int64","Name"'
    assert out.splitlines()[1] == '"p","1","1099511627776","n"'


def test_import_reads_hand_written_files(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path
) -> None:
    client, table = table_client, dev_table
    csv_file = tmp_path / "hand.csv"
    csv_file.write_text("PartitionKey,RowKey,Age@Edm.Int32,Name,Ok@Edm.Boolean\np,1,42,Ann,true\np,2,,,false\n")
    jsonl_file = tmp_path / "hand.jsonl"
    jsonl_file.write_text('{"PartitionKey":"q","RowKey":"1","N":5,"F":1.5,"B":true}\n\n')
    ok(run_cli("import", str(csv_file), table, connection_string=devstore_connection_string))
    ok(run_cli("import", str(jsonl_file), table, connection_string=devstore_connection_string))
    got = table_contents(client, table)
    assert got[("p", "1")] == {"PartitionKey": (EdmType.STRING, "p"), "RowKey": (EdmType.STRING, "1"),
                               "Age": (EdmType.INT32, 42), "Name": (EdmType.STRING, "Ann"), "Ok": (EdmType.BOOLEAN, True)}
    assert got[("p", "2")]["Ok"] == (EdmType.BOOLEAN, False) and "Name" not in got[("p", "2")]
    assert got[("q", "1")]["N"] == (EdmType.INT32, 5) and got[("q", "1")]["F"] == (EdmType.DOUBLE, "1.5")


# ---------------------------------------------------------------- import: rejects and exit status


def test_import_rejects_file_and_exit_status(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    table_client.insert_entity(dev_table, DynamicEntity(PartitionKey="p", RowKey="taken", V=1))
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"PartitionKey":"p","RowKey":"new","V":2}\n'
        "this is not json\n"
        '{"PartitionKey":"p","RowKey":"taken","V":3}\n'
        '{"PartitionKey":"p","RowKey":"bad","N":"x","N@odata.type":"Edm.Int64"}\n'
    )
    rejects = tmp_path / "rejects.jsonl"
    result = run_cli("import", str(source), dev_table, "--rejects", str(rejects), env=dev_env)
    assert result.returncode == 3, result.stderr
    assert b"imported 1 entity, 3 failed" in result.stderr
    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    errors = {(line["tablesdk.error"]["line"], line["tablesdk.error"]["code"]) for line in lines}
    assert errors == {(2, "InvalidInput"), (3, "EntityAlreadyExists"), (4, "InvalidInput")}
    taken = next(line for line in lines if line.get("RowKey") == "taken")
    assert taken["V"] == 3 and taken["tablesdk.error"]["status"] == 409
    assert next(line for line in lines if line["tablesdk.error"]["line"] == 2)["tablesdk.error"]["text"] == "this is not json"
    # The rejects file is an import file: fixed up, it goes back in as it is.
    retry = run_cli("import", str(rejects), dev_table, "--mode", "upsert", env=dev_env)
    assert retry.returncode == 3  # the two unreadable lines fail again; the conflict is now an upsert
    assert table_client.get_entity(dev_table, "p", "taken")["V"] == 3


def test_import_from_stdin_and_missing_table(dev_table: str, dev_env: dict[str, str]) -> None:
    result = run_cli("import", "-", dev_table, stdin=b'{"PartitionKey":"a","RowKey":"b"}\n', env=dev_env)
    assert result.returncode == 0 and b"imported 1 entity, 0 failed" in result.stderr
    missing = run_cli("import", "-", "nosuchtable1", stdin=b'{"PartitionKey":"a","RowKey":"b"}\n', env=dev_env)
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1
    assert b"404 TableNotFound" in missing.stderr and b"--create-table" in missing.stderr
    wrong_key = dev_env["AZURE_STORAGE_CONNECTION_STRING"].replace("AccountKey=Eby8", "AccountKey=Xby8")
    refused = run_cli("import", "-", dev_table, stdin=b'{"PartitionKey":"a","RowKey":"c"}\n',
                      env={"AZURE_STORAGE_CONNECTION_STRING": wrong_key})
    assert refused.returncode == 1 and b"403 AuthenticationFailed" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1


# ---------------------------------------------------------------- errors, exit statuses, secrets


def test_errors_are_one_line_with_a_hint(dev_table: str, dev_env: dict[str, str]) -> None:
    result = run_cli("get", dev_table, "p", "missing", env=dev_env)
    assert result.returncode == 1 and result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("tablesdk: error: 404 ResourceNotFound") and "check the PartitionKey" in lines[0]
    debug = run_cli("--debug", "get", dev_table, "p", "missing", env=dev_env)
    assert debug.returncode == 1 and b"Traceback (most recent call last)" in debug.stderr
    usage = run_cli("get", dev_table, env=dev_env)
    assert usage.returncode == 2 and b"Usage:" in usage.stderr
    no_account = run_cli("tables", "list")
    assert no_account.returncode == 2 and b"--connection-string" in no_account.stderr


def test_unreachable_service_says_what_to_do() -> None:
    result = run_cli("--retries", "0", "--account-name", "acct", "--account-key", "a2V5a2V5a2V5a2V5",
                     "--table-endpoint", "http://127.0.0.1:9/acct", "tables", "list")
    assert result.returncode == 1
    assert b"cannot reach the service" in result.stderr and len(result.stderr.splitlines()) == 1


SECRET_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def test_no_secret_in_any_output(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str, tmp_path: Path
) -> None:
    from tablesdk import generate_table_sas

    endpoint = table_client.table_endpoint
    sas = generate_table_sas("devstoreaccount1", SECRET_KEY, dev_table, permission="raud",
                             expiry=datetime(2099, 1, 1, tzinfo=timezone.utc))
    signature = next(part[4:] for part in sas.split("&") if part.startswith("sig="))
    key_args = ["--account-name", "devstoreaccount1", "--account-key", SECRET_KEY, "--table-endpoint", endpoint]
    sas_args = ["--account-name", "devstoreaccount1", "--sas-token", sas, "--table-endpoint", endpoint]
    bad_key = ["--account-name", "devstoreaccount1", "--account-key", "d3Jvbmcga2V5IGZvciB0ZXN0cw==",
               "--table-endpoint", endpoint]
    entity = '{"PartitionKey":"p","RowKey":"1","V":1}'
    runs = [
        run_cli("--debug", *key_args, "insert", dev_table, "--entity", entity),
        run_cli("--debug", *key_args, "tables", "list"),
        run_cli("--debug", *key_args, "get", dev_table, "p", "nope"),
        run_cli("--debug", *sas_args, "query", dev_table, "-o", "jsonl"),
        run_cli("--debug", *sas_args, "get", dev_table, "p", "nope"),
        run_cli("--debug", *sas_args, "export", dev_table, str(tmp_path / "x.jsonl")),
        run_cli("--debug", *bad_key, "tables", "list"),
        run_cli("--debug", "--connection-string", devstore_connection_string, "count", dev_table),
        run_cli("--debug", "--connection-string", devstore_connection_string + "Junk=1", "count", dev_table),
        run_cli("--debug", "--connection-string", devstore_connection_string, "get", "no", "p", "r"),
    ]
    assert runs[0].returncode == 0 and runs[3].returncode == 0 and runs[6].returncode == 1
    assert b"REDACTED" in runs[4].stderr or b"sig=" not in runs[4].stderr
    for result in runs:
        for stream in (result.stdout, result.stderr):
            text = stream.decode("utf-8", "replace")
            assert SECRET_KEY not in text and SECRET_KEY[:20] not in text
            assert signature not in text and signature.replace("%2B", "+").replace("%2F", "/") not in text
    assert (tmp_path / "x.jsonl").read_text().count("\n") == 1


def test_without_the_cli_extra_it_says_how_to_install() -> None:
    code = (
        "import runpy, sys; sys.modules['click'] = None; sys.argv = ['tablesdk', 'tables', 'list']; "
        "runpy.run_module('tablesdk', run_name='__main__', alter_sys=True)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, check=False, timeout=60)
    assert result.returncode == 2
    assert b"pip install 'click>=8.1' 'rich>=13'" in result.stderr and b"pip install '.[cli]'" in result.stderr


# ---------------------------------------------------------------- tables and single entities


def test_tables_commands(table_client: CloudTableClient, dev_env: dict[str, str]) -> None:
    ok(run_cli("tables", "create", "clitables1", env=dev_env))
    assert ok(run_cli("tables", "exists", "clitables1", env=dev_env)) == "true\n"
    assert run_cli("tables", "create", "clitables1", env=dev_env).returncode == 1
    ok(run_cli("tables", "create", "clitables1", "--if-not-exists", env=dev_env))
    ok(run_cli("tables", "create", "othertable", env=dev_env))
    assert ok(run_cli("tables", "list", "--prefix", "clit", env=dev_env)).split() == ["clitables1"]
    refused = run_cli("tables", "delete", "clitables1", env=dev_env, stdin=b"")
    assert refused.returncode == 2 and b"--yes" in refused.stderr
    ok(run_cli("tables", "delete", "clitables1", "--yes", env=dev_env))
    assert ok(run_cli("tables", "exists", "clitables1", env=dev_env)) == "false\n"


def test_entity_commands(table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]) -> None:
    etag = ok(run_cli("insert", dev_table, "--entity", '{"PartitionKey":"p","RowKey":"1","A":1,"B":"b"}', env=dev_env))
    assert etag.startswith('W/"')
    got = json.loads(ok(run_cli("get", dev_table, "p", "1", env=dev_env)))
    assert got["odata.etag"] == etag.strip() and got["A"] == 1 and "Timestamp" in got
    assert run_cli("insert", dev_table, "--entity", '{"PartitionKey":"p","RowKey":"1"}', env=dev_env).returncode == 1
    ok(run_cli("merge", dev_table, "--entity", '{"PartitionKey":"p","RowKey":"1","C":3}', env=dev_env))
    assert sorted(table_client.get_entity(dev_table, "p", "1")) == ["A", "B", "C"]
    stale = run_cli("replace", dev_table, "--etag", etag.strip(), "--entity", '{"PartitionKey":"p","RowKey":"1"}', env=dev_env)
    assert stale.returncode == 1 and b"412 UpdateConditionNotSatisfied" in stale.stderr
    ok(run_cli("replace", dev_table, "--entity", '{"PartitionKey":"p","RowKey":"1","D":4}', env=dev_env))
    assert sorted(table_client.get_entity(dev_table, "p", "1")) == ["D"]
    ok(run_cli("upsert", dev_table, "--entity", "-", env=dev_env, stdin=b'{"PartitionKey":"p","RowKey":"2","E":5}'))
    ok(run_cli("upsert", dev_table, "--mode", "replace", "--entity", '{"PartitionKey":"p","RowKey":"2","F":6}', env=dev_env))
    assert sorted(table_client.get_entity(dev_table, "p", "2")) == ["F"]
    selected = json.loads(ok(run_cli("get", dev_table, "p", "2", "--select", "F", env=dev_env)))
    assert selected["F"] == 6
    ok(run_cli("delete", dev_table, "p", "2", env=dev_env))
    assert run_cli("delete", dev_table, "p", "2", env=dev_env).returncode == 1
    bad = run_cli("insert", dev_table, "--entity", "{nope", env=dev_env)
    assert bad.returncode == 2 and b"--entity" in bad.stderr


# ---------------------------------------------------------------- query, count, delete-entities, copy


def test_query_outputs(table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]) -> None:
    fill(table_client, dev_table, [DynamicEntity(PartitionKey="p", RowKey=str(i), N=i) for i in range(5)])
    filter_ = ["--filter", "N ge 2"]
    jsonl = ok(run_cli("query", dev_table, *filter_, env=dev_env)).splitlines()  # jsonl when piped
    assert [json.loads(line)["N"] for line in jsonl] == [2, 3, 4]
    assert all("Timestamp" in json.loads(line) for line in jsonl)
    array = json.loads(ok(run_cli("query", dev_table, *filter_, "--top", "2", "-o", "json", env=dev_env)))
    assert [item["RowKey"] for item in array] == ["2", "3"]
    assert json.loads(ok(run_cli("query", dev_table, "--filter", "N gt 9", "-o", "json", env=dev_env))) == []
    csv_text = ok(run_cli("query", dev_table, *filter_, "--select", "N", "-o", "csv", env=dev_env))
    assert csv_text.splitlines()[0] == '"PartitionKey","RowKey","Timestamp@Edm.DateTime","N@Edm.Int32"'
    grid = ok(run_cli("query", dev_table, *filter_, "-o", "table", env=dev_env))
    assert "PartitionKey" in grid and "│ 3" in grid.replace("┃", "│")
    assert ok(run_cli("count", dev_table, env=dev_env)) == "5\n"
    assert ok(run_cli("count", dev_table, *filter_, env=dev_env)) == "3\n"


def test_delete_entities(table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]) -> None:
    entities = [DynamicEntity(PartitionKey=f"p{i % 3}", RowKey=f"{i:04d}", N=i) for i in range(450)]
    fill(table_client, dev_table, entities)
    dry = run_cli("delete-entities", dev_table, "--filter", "N lt 300", "--dry-run", env=dev_env)
    assert ok(dry) == "300\n"
    assert sum(1 for _ in table_client.create_query(dev_table)) == 450
    refused = run_cli("delete-entities", dev_table, "--filter", "N lt 300", env=dev_env, stdin=b"")
    assert refused.returncode == 2
    assert ok(run_cli("delete-entities", dev_table, "--filter", "N lt 300", "--yes", env=dev_env)) == "300\n"
    assert sorted(e["N"] for e in table_client.create_query(dev_table)) == list(range(300, 450))


def test_copy_across_formats_and_accounts(
    table_client: CloudTableClient, dev_table: str, devstore_connection_string: str,
    azurite_connection_string: str, tmp_path: Path,
) -> None:
    fill(table_client, dev_table, edm_entities())
    expected = table_contents(table_client, dev_table)
    env = {"AZURE_STORAGE_CONNECTION_STRING": devstore_connection_string}
    atom_copy = run_cli("copy", dev_table, "copyatom1", "--to-format", "atom", "--create-table", env=env)
    assert ok(atom_copy) == "" and b"copied 4 entities, 0 failed" in atom_copy.stderr
    assert table_contents(table_client, "copyatom1") == expected
    name = "copyaz" + uuid.uuid4().hex[:10]
    ok(run_cli("copy", dev_table, name, "--to-connection-string", azurite_connection_string, "--create-table",
               "--filter", "PartitionKey eq 'p1'", env=env))
    from tablesdk import CloudStorageAccount

    with CloudStorageAccount.parse(azurite_connection_string).create_cloud_table_client() as azurite:
        try:
            assert table_contents(azurite, name) == {k: v for k, v in expected.items() if k[0] == "p1"}
        finally:
            azurite.delete_table_if_exists(name)
    again = run_cli("copy", dev_table, "copyatom1", "--rejects", str(tmp_path / "r.jsonl"), env=env)
    assert again.returncode == 3 and (tmp_path / "r.jsonl").read_text().count("EntityAlreadyExists") == 4


# ---------------------------------------------------------------- export: resume, progress; serve


def test_export_resume_continues_where_it_stopped(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    from tablesdk.cli._export import ExportSpec, export_table
    from tablesdk.cli._progress import Progress

    fill(table_client, dev_table, [DynamicEntity(PartitionKey=f"p{i // 700}", RowKey=f"{i:05d}", N=i) for i in range(2500)])
    full = tmp_path / "full.jsonl"
    ok(run_cli("export", dev_table, str(full), env=dev_env))

    class Interrupt(Progress):
        def update(self, done: int, total: int | None = None) -> None:
            if done >= 1000:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C after the first page

    partial = tmp_path / "part.jsonl"
    spec = ExportSpec(dev_table, None, (), "jsonl")
    with pytest.raises(KeyboardInterrupt):
        export_table(table_client, spec, str(partial), resume=False, progress=Interrupt("x", False))
    state = tmp_path / "part.jsonl.tablesdk-resume"
    rows = tmp_path / json.loads(state.read_text())["rows"]  # written beside the target, renamed onto it at the end
    assert not partial.exists() and 1000 <= rows.read_bytes().count(b"\n") < 2500
    with rows.open("ab") as handle:
        handle.write(b'{"PartitionKey":"half-written')  # a page cut short after the last checkpoint
    again = run_cli("export", dev_table, str(partial), env=dev_env)
    assert again.returncode == 1 and b"--resume" in again.stderr
    assert again.stderr.count(b"\n") == 1 and b"export stopped" not in again.stderr  # refused: nothing stopped
    ok(run_cli("export", dev_table, str(partial), "--resume", env=dev_env))
    assert partial.read_bytes() == full.read_bytes() and not state.exists() and not rows.exists()
    other = run_cli("export", dev_table, str(tmp_path / "x.jsonl"), "--resume", "--filter", "N gt 1", env=dev_env)
    assert other.returncode == 0  # nothing to resume: a plain export, and it says so
    assert b"no unfinished export to" in other.stderr and b"starting a new one" in other.stderr


def test_csv_export_resume_keeps_columns(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    from tablesdk.cli._export import ExportSpec, export_table
    from tablesdk.cli._progress import Progress

    entities = [DynamicEntity(PartitionKey="p", RowKey=f"{i:05d}", **({"A": i} if i < 1000 else {"B": str(i)}))
                for i in range(1500)]
    fill(table_client, dev_table, entities)

    class Interrupt(Progress):
        def update(self, done: int, total: int | None = None) -> None:
            if done >= 1000:
                raise KeyboardInterrupt

    out = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt):
        export_table(table_client, ExportSpec(dev_table, None, (), "csv"), str(out), resume=False,
                     progress=Interrupt("x", False))
    ok(run_cli("export", dev_table, str(out), "--resume", env=dev_env))
    lines = out.read_text().splitlines()
    assert lines[0] == '"PartitionKey","RowKey","A@Edm.Int32","B"' and len(lines) == 1501
    # Rows written before column B was seen get its empty cell: every row has a cell per column.
    assert lines[1] == '"p","00000","0",' and lines[-1] == '"p","01499",,"1499"'
    ok(run_cli("import", str(out), "copied1", "--create-table", env=dev_env))
    assert table_contents(table_client, "copied1") == table_contents(table_client, dev_table)


def test_progress_goes_to_stderr_only(table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]) -> None:
    fill(table_client, dev_table, [DynamicEntity(PartitionKey="p", RowKey=str(i)) for i in range(10)])
    shown = run_cli("--progress", "export", dev_table, "-", env=dev_env)
    quiet = run_cli("export", dev_table, "-", env=dev_env)  # stderr is a pipe: no progress by default
    assert shown.stdout == quiet.stdout and shown.stdout.count(b"\n") == 10
    assert b"exporting" in shown.stderr and b"exporting" not in quiet.stderr
    assert b"\x1b[" not in quiet.stderr
    source = b"".join(b'{"PartitionKey":"q","RowKey":"%d"}\n' % i for i in range(7))
    imported = run_cli("--progress", "import", "-", dev_table, env=dev_env, stdin=source)
    assert imported.returncode == 0 and b"7" in imported.stderr and imported.stdout == b""


def test_import_progress_knows_the_total_of_a_file(dev_table: str, dev_env: dict[str, str], tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(b'{"PartitionKey":"q","RowKey":"%d"}\n' % i for i in range(7)))
    imported = run_cli("--progress", "import", str(source), dev_table, env=dev_env)
    assert imported.returncode == 0 and b"7/7" in imported.stderr


def test_serve_runs_the_bundled_emulator() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
    env["PYTHONPATH"] = str(REPO)
    server = subprocess.Popen([sys.executable, "-m", "tablesdk", "serve", "--port", "0",
                               "--bearer-token", "served-token", "--page-size", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().decode().split("serving ", 1)[1].strip()
        connection = server.stdout.readline().decode().split("connection string ", 1)[1].strip()
        ok(run_cli("tables", "create", "servedtable", connection_string=connection))
        assert ok(run_cli("tables", "list", connection_string=connection)) == "servedtable\n"
        # the emulator's own options reach it: tokens it accepts, the page size it answers with
        token_client = CloudStorageAccount("devstoreaccount1", url, _Token("served-token")).create_cloud_table_client()
        with token_client:
            assert list(token_client.list_tables()) == ["servedtable"]
            for row in ("1", "2", "3"):
                token_client.insert_entity("servedtable", DynamicEntity(PartitionKey="p", RowKey=row))
            first = token_client.create_query("servedtable").execute_segmented()
            assert len(first.results) == 2 and first.continuation_token is not None
        other = CloudStorageAccount("devstoreaccount1", url, _Token("other-token")).create_cloud_table_client()
        with other, pytest.raises(TableServiceError) as refused:
            list(other.list_tables())
        assert refused.value.status_code == 403
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode == 0


def test_serve_errors_name_the_command() -> None:
    refused = run_cli("serve", "--port", "not-a-port")
    assert refused.returncode == 2
    assert b"usage: tablesdk serve" in refused.stderr and b"tablesdk serve: error: argument --port" in refused.stderr
    shown = run_cli("serve", "--help")
    assert shown.returncode == 0 and b"usage: tablesdk serve" in shown.stdout and b"--bearer-token" in shown.stdout


@dataclass
class _AccessToken:
    token: str
    expires_on: int


class _Token:
    """A credential with azure-identity's get_token shape, handing out one fixed token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: object) -> _AccessToken:
        return _AccessToken(self.token, int(time.time()) + 3600)


def test_parallel_export_reads_ranges_and_resumes(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    from tablesdk.cli._export import ExportSpec, export_table
    from tablesdk.cli._progress import Progress

    fill(table_client, dev_table, [DynamicEntity(PartitionKey=f"part{i % 40:02d}", RowKey=f"{i:05d}", N=i)
                                   for i in range(4000)])
    sequential = tmp_path / "seq.jsonl"
    ok(run_cli("export", dev_table, str(sequential), env=dev_env))
    parallel = tmp_path / "par.jsonl"
    ok(run_cli("export", dev_table, str(parallel), "--parallel", "4", env=dev_env))
    expected = sorted(sequential.read_bytes().splitlines())
    assert len(expected) == 4000 and sorted(parallel.read_bytes().splitlines()) == expected

    class Interrupt(Progress):
        def update(self, done: int, total: int | None = None) -> None:
            if done >= 500:
                raise KeyboardInterrupt

    resumed = tmp_path / "resumed.jsonl"
    with pytest.raises(KeyboardInterrupt):
        export_table(table_client, ExportSpec(dev_table, None, (), "jsonl"), str(resumed), resume=False,
                     progress=Interrupt("x", False), parallel=4)
    state = json.loads((tmp_path / "resumed.jsonl.tablesdk-resume").read_text())
    assert len(state["ranges"]) > 1 and state["ranges"][0]["low"] is None and state["ranges"][-1]["high"] is None
    ok(run_cli("export", dev_table, str(resumed), "--resume", "--parallel", "2", env=dev_env))
    assert sorted(resumed.read_bytes().splitlines()) == expected


def test_export_killed_mid_way_resumes_exactly(tmp_path: Path) -> None:
    """A crash (SIGKILL: nothing is cleaned up) loses nothing and duplicates nothing after --resume."""
    import signal
    import time

    from tablesdk import CloudStorageAccount
    from tablesdk.devstore import DevStore

    with DevStore(port=0, page_size=20) as store:  # small pages: the export takes a few seconds
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("killed")
        fill(client, "killed", [DynamicEntity(PartitionKey=f"p{i % 7}", RowKey=f"{i:05d}", N=i) for i in range(4000)])
        env = {k: v for k, v in os.environ.items() if k != "AZURE_STORAGE_CONNECTION_STRING"}
        env.update(PYTHONPATH=str(REPO), AZURE_STORAGE_CONNECTION_STRING=store.connection_string)
        out = tmp_path / "killed.jsonl"
        state = tmp_path / "killed.jsonl.tablesdk-resume"
        child = subprocess.Popen([sys.executable, "-m", "tablesdk", "export", "killed", str(out)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not state.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL, "the export finished before it could be killed"
        ok(run_cli("export", "killed", str(out), "--resume", connection_string=store.connection_string))
        lines = out.read_bytes().splitlines()
        assert len(lines) == 4000 and len(set(lines)) == 4000
        assert {json.loads(line)["N"] for line in lines} == set(range(4000))
        client.close()


@pytest.mark.parametrize("command", [["query", "{table}"], ["export", "{table}", "-"]])
def test_a_reader_that_stops_early_is_not_an_error(
    command: list[str], table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]
) -> None:
    """`tablesdk query T | head -1`: the command stops quietly, status 0 (a pipeline with pipefail passes)."""
    fill(table_client, dev_table, [DynamicEntity(PartitionKey="p", RowKey=f"{i:05d}", Pad="x" * 200)
                                   for i in range(1500)])  # far more than a pipe buffer holds
    child_env = {**os.environ, "PYTHONPATH": str(REPO), **dev_env}
    child = subprocess.Popen([sys.executable, "-m", "tablesdk", *(arg.format(table=dev_table) for arg in command)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env)
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline().startswith(b'{"PartitionKey":"p"')
    child.stdout.close()
    errors = child.stderr.read()
    assert child.wait(timeout=60) == 0, errors
    assert b"Error" not in errors and b"Traceback" not in errors and b"error:" not in errors


# ---------------------------------------------------------------- import --skip-existing, query's grid, CSV rows


def test_import_skip_existing_resumes_an_interrupted_import(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    entities = [DynamicEntity(PartitionKey=f"p{i // 1500}", RowKey=f"{i:05d}", N=i) for i in range(3000)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"PartitionKey": e.PartitionKey, "RowKey": e.RowKey, "N": e["N"]}) + "\n"
                              for e in entities))
    fill(table_client, dev_table, entities[:1800])  # the run that was interrupted
    table_client.insert_entity(dev_table, DynamicEntity(PartitionKey="p1", RowKey="02500", N=-1))  # a stray one
    again = run_cli("import", str(source), dev_table, "--skip-existing", env=dev_env)
    assert again.returncode == 0, again.stderr
    assert b"imported 1199 entities, 1801 skipped (in the table already), 0 failed" in again.stderr
    assert table_client.get_entity(dev_table, "p1", "02500")["N"] == -1  # skipped, not overwritten
    assert len(list(table_client.create_query(dev_table))) == 3000


def test_skip_existing_looks_keys_up_a_block_at_a_time_and_counts_409s_as_skipped(
    table_client: CloudTableClient, dev_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tablesdk.cli import _transfer
    from tablesdk.cli._progress import Progress

    entities = [DynamicEntity(PartitionKey="p", RowKey=f"{i:04d}", N=i) for i in range(400)]
    fill(table_client, dev_table, entities[:250])
    existing = _transfer.ExistingKeys(table_client, dev_table)
    keys = [(e.PartitionKey, e.RowKey) for e in entities]
    assert existing.present(keys) == set(keys[:250])  # one key-range query for the whole block

    sent: list[int] = []
    bulk_insert = CloudTableClient.bulk_insert

    def counting(self: CloudTableClient, table: str, items: Any, *args: Any, **kwargs: Any) -> Any:
        items = list(items)
        sent.append(len(items))
        return bulk_insert(self, table, items, *args, **kwargs)

    monkeypatch.setattr(CloudTableClient, "bulk_insert", counting)
    lines = [(n, e, "") for n, e in enumerate(entities, 1)]
    summary = _transfer.import_entities(table_client, dev_table, lines, "insert", Progress("x", False),
                                        _transfer.ImportSummary(), skip_existing=True)
    assert (summary.written, summary.skipped, summary.failed) == (150, 250, 0)
    assert sent == [150]  # the existing ones were found by the look-up: none was sent to be refused

    # An input out of key order makes the look-up give up: the service's 409s are counted as skipped.
    monkeypatch.setattr(_transfer, "EXISTING_CHECK_GIVE_UP", 0)
    more = [DynamicEntity(PartitionKey="p", RowKey=f"{i:04d}", N=i) for i in (399, 10, 401, 20)]
    summary = _transfer.import_entities(table_client, dev_table, [(n, e, "") for n, e in enumerate(more, 1)],
                                        "insert", Progress("x", False), _transfer.ImportSummary(), skip_existing=True)
    assert (summary.written, summary.skipped, summary.failed) == (1, 3, 0)


def test_query_grid_is_capped_and_says_so(table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str]) -> None:
    fill(table_client, dev_table, [DynamicEntity(PartitionKey="p", RowKey=f"{i:04d}", N=i) for i in range(150)])
    grid = run_cli("query", dev_table, "-o", "table", env=dev_env)
    shown = grid.stdout.decode()  # RowKey cells, spaced: a Timestamp's digits may hold "0100" too
    assert grid.returncode == 0 and " 0099 " in shown and " 0100 " not in shown
    assert b"showing 100 of 150 entities; use --limit N to see more, or --output jsonl" in grid.stderr
    assert len(ok(run_cli("query", dev_table, env=dev_env)).splitlines()) == 150  # piped: every entity


def test_csv_rows_with_too_few_cells_are_rejected(
    table_client: CloudTableClient, dev_table: str, dev_env: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "short.csv"
    source.write_text('PartitionKey,RowKey,A\n"p","1","x"\n"p","2"\n')
    result = run_cli("import", str(source), dev_table, env=dev_env)
    assert result.returncode == 3
    assert b"imported 1 entity, 1 failed" in result.stderr and b"line 3" in result.stderr
    assert b"2 cells but the header has 3 columns" in result.stderr


def test_connection_options_after_the_command(table_client: CloudTableClient, dev_table: str,
                                              devstore_connection_string: str) -> None:
    fill(table_client, dev_table, [DynamicEntity(PartitionKey="p", RowKey="1")])
    after = run_cli("count", dev_table, "--connection-string", devstore_connection_string, "--wire-format", "atom")
    assert ok(after) == "1\n"
    old = run_cli("--format", "atom", "count", dev_table, connection_string=devstore_connection_string)
    assert ok(old) == "1\n" and b"--format is deprecated: use --wire-format" in old.stderr


# ---------------------------------------------------------------- Parquet (docs/data.md)


def test_parquet_export_import_round_trip_is_exact(
    client: CloudTableClient, target: str, connection_string: str, table: str, second_table: str, tmp_path: Path,
) -> None:
    import pyarrow.parquet as pq

    fill(client, table, edm_entities())
    path = tmp_path / "out.parquet"
    fmt = ["--format", wire_format(target)]
    result = run_cli(*fmt, "export", table, str(path), connection_string=connection_string)
    assert b"exported 4 entities" in result.stderr, result.stderr.decode()
    schema = pq.read_schema(path)
    assert schema.field("G").metadata == {b"tablesdk.edm_type": b"Edm.Guid"}
    assert str(schema.field("T").type) == "timestamp[ns, tz=UTC]" and str(schema.field("I64").type) == "int64"
    result = run_cli(*fmt, "import", str(path), second_table, "--create-table", connection_string=connection_string)
    ok(result)
    assert b"imported 4 entities, 0 failed" in result.stderr
    assert table_contents(client, second_table) == table_contents(client, table)
    assert table_contents(client, table) == {(e.PartitionKey, e.RowKey): comparable(e) for e in edm_entities()}


def test_parquet_export_in_parallel_writes_a_file_per_range_with_one_schema(
    client: CloudTableClient, target: str, connection_string: str, table: str, second_table: str, tmp_path: Path,
) -> None:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    entities = edm_entities() + [DynamicEntity(PartitionKey=f"q{n:02d}", RowKey="r", N=n) for n in range(30)]
    fill(client, table, entities)
    path = tmp_path / "out.parquet"
    fmt = ["--format", wire_format(target)]
    result = run_cli(*fmt, "export", table, str(path), "--parallel", "3", connection_string=connection_string)
    assert b"exported 34 entities" in result.stderr, result.stderr.decode()
    files = sorted(path.iterdir())
    assert len(files) > 1 and all(f.name.startswith("part-") and f.suffix == ".parquet" for f in files)
    schemas = {str(pq.read_schema(f)) for f in files}
    assert len(schemas) == 1  # every range's file has every column: a dataset reader loses none
    assert ds.dataset(str(path)).to_table().num_rows == 34 and "G" in ds.dataset(str(path)).schema.names
    result = run_cli(*fmt, "import", str(path), second_table, "--create-table", connection_string=connection_string)
    assert b"imported 34 entities, 0 failed" in result.stderr, result.stderr.decode()
    assert table_contents(client, second_table) == {(e.PartitionKey, e.RowKey): comparable(e) for e in entities}


def test_parquet_export_refuses_stdout_and_resume(dev_env: dict[str, str], dev_table: str) -> None:
    result = run_cli("export", dev_table, "-", "--format", "parquet", env=dev_env)
    assert result.returncode != 0 and b"Parquet" in result.stderr


def test_export_state_keeps_up_with_every_page(tmp_path: Path) -> None:
    """After each page the state file records every row written so far: a kill re-reads at most a page."""
    from tablesdk.cli._export import RESUME_SUFFIX, ExportSpec, export_table
    from tablesdk.cli._progress import Progress
    from tablesdk.devstore import DevStore

    out = tmp_path / "paged.jsonl"
    seen: list[tuple[int, int, int]] = []  # (rows written, rows the state records, bytes the state records)

    class StateReader(Progress):
        def update(self, done: int, total: int | None = None) -> None:
            super().update(done, total)
            if done:
                state = json.loads(Path(str(out) + RESUME_SUFFIX).read_text())
                rows = next(tmp_path.glob("paged.jsonl.*.tablesdk-rows"))
                seen.append((done, state["count"], state["offset"] - rows.stat().st_size))

    with DevStore(port=0, page_size=25) as store:
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("paged")
        fill(client, "paged", [DynamicEntity(PartitionKey="p", RowKey=f"{i:04d}", N=i) for i in range(200)])
        count = export_table(client, ExportSpec("paged", None, (), "jsonl"), str(out), resume=False,
                             progress=StateReader("x", False))
        client.close()
    assert count == 200 and len(out.read_bytes().splitlines()) == 200
    assert seen == [(done, done, 0) for done in range(25, 201, 25)]

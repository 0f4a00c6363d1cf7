"""Client-side encryption on the command line (export, import, copy, reencrypt) and the re-encryption
of a table's 1.0 entities, with a concurrent writer ordered by explicit signals, against the bundled
emulator and Azurite."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import ok, run_cli

from tablesdk import (
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    EdmType,
    LocalKeyWrapper,
    TableEncryptionPolicy,
    TableRequestOptions,
)
from tablesdk.cli._reencrypt import ReencryptState, protocol_of, reencrypt_table

pytestmark = pytest.mark.integration

KEY_BYTES = bytes(range(32))
KEY = LocalKeyWrapper(KEY_BYTES, "cli-key")
LEGACY = TableEncryptionPolicy(key=KEY, protocol=PROTOCOL_LEGACY, encryption_resolver=lambda pk, rk, n: n == "Name")
AUTHENTICATED = TableEncryptionPolicy(key=KEY, encryption_resolver=lambda pk, rk, n: n == "Name")


@pytest.fixture(params=["devstore-json", "azurite-json"])
def cli_connection_string(request: pytest.FixtureRequest) -> str:
    name = "azurite_connection_string" if request.param.startswith("azurite") else "devstore_connection_string"
    return str(request.getfixturevalue(name))


@pytest.fixture
def raw(cli_connection_string: str) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(cli_connection_string).create_cloud_table_client() as client:
        yield client


@pytest.fixture
def tables(raw: CloudTableClient, unique_table_name: str) -> Iterator[tuple[str, str]]:
    names = (unique_table_name, unique_table_name + "copy")
    for name in names:
        raw.create_table(name)
    yield names
    for name in names:
        raw.delete_table_if_exists(name)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key.json"
    path.write_text(json.dumps({"kid": "cli-key", "key": base64.b64encode(KEY_BYTES).decode()}))
    return path


def write(raw: CloudTableClient, table: str, policy: TableEncryptionPolicy | None, rk: str, name: str) -> None:
    options = TableRequestOptions(encryption_policy=policy) if policy is not None else None
    raw.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey=rk, Name=name, Ward="w"), options=options)


def read_as(raw: CloudTableClient, table: str, rk: str) -> DynamicEntity:
    return raw.get_entity(table, "p", rk, options=TableRequestOptions(encryption_policy=AUTHENTICATED))


def test_export_import_and_copy(
    raw: CloudTableClient, tables: tuple[str, str], key_file: Path, tmp_path: Path, cli_connection_string: str
) -> None:
    source, destination = tables
    write(raw, source, AUTHENTICATED, "1", "Ada")
    write(raw, source, LEGACY, "2", "Bob")
    key = ("--encryption-key-file", str(key_file))

    plain = tmp_path / "plain.jsonl"
    ok(run_cli("export", source, str(plain), *key, connection_string=cli_connection_string))
    rows = [json.loads(line) for line in plain.read_text().splitlines()]
    assert sorted(row["Name"] for row in rows) == ["Ada", "Bob"]
    assert not any("_ClientEncryptionMetadata1" in row for row in rows)
    assert "cli-key" not in run_cli("export", source, "-", connection_string=cli_connection_string).stderr.decode()

    assert '"Ada"' in ok(run_cli("get", source, "p", "1", *key, connection_string=cli_connection_string))
    assert "Bob" in ok(run_cli("query", source, "--select", "Name", "-o", "jsonl", *key,
                               connection_string=cli_connection_string))

    cipher = tmp_path / "cipher.jsonl"
    ok(run_cli("export", source, str(cipher), connection_string=cli_connection_string))
    assert all("_ClientEncryptionMetadata1" in json.loads(line) for line in cipher.read_text().splitlines())
    assert "Ada" not in cipher.read_text()

    ok(run_cli("import", str(cipher), destination, connection_string=cli_connection_string))  # ciphertext kept
    assert read_as(raw, destination, "1")["Name"] == "Ada"
    raw.delete_entity(destination, partition_key="p", row_key="1", etag="*")
    raw.delete_entity(destination, partition_key="p", row_key="2", etag="*")

    ok(run_cli("import", str(plain), destination, *key, "--encrypt-properties", "Name",
               connection_string=cli_connection_string))
    stored = raw.get_entity(destination, "p", "1")
    assert stored.edm_type("Name") is EdmType.BINARY and read_as(raw, destination, "1")["Name"] == "Ada"
    refused = run_cli("import", str(plain), destination, *key, "--require-encryption", "--mode", "replace",
                      connection_string=cli_connection_string)
    assert refused.returncode != 0 and b"encryption is required" in refused.stderr
    assert str(KEY_BYTES) not in refused.stderr.decode() and base64.b64encode(KEY_BYTES).decode() not in (
        refused.stderr.decode() + refused.stdout.decode()
    )

    for rk in ("1", "2"):
        raw.delete_entity(destination, partition_key="p", row_key=rk, etag="*")
    ok(run_cli("copy", source, destination, "--select", "Name", connection_string=cli_connection_string))
    assert read_as(raw, destination, "1")["Name"] == "Ada"  # the ciphertext and its metadata, as stored
    assert raw.get_entity(destination, "p", "2")["_ClientEncryptionMetadata1"] == raw.get_entity(
        source, "p", "2")["_ClientEncryptionMetadata1"]


def test_reencrypt_converts_the_legacy_entities_and_leaves_the_others(
    raw: CloudTableClient, tables: tuple[str, str], key_file: Path, tmp_path: Path, cli_connection_string: str
) -> None:
    table = tables[0]
    for n in range(5):
        write(raw, table, LEGACY, f"legacy{n}", f"name{n}")
    write(raw, table, AUTHENTICATED, "new", "fresh")
    write(raw, table, None, "plain", "open")
    state = tmp_path / "state"
    stopped = reencrypt_table_until(raw, table, state, stop_after=3)
    assert not stopped.done and stopped.next_page and state.exists()

    result = run_cli("reencrypt", table, "--encryption-key-file", str(key_file), "--state-file", str(state),
                     "--resume", connection_string=cli_connection_string)
    assert "re-encrypted" in ok(result) + result.stderr.decode() and not state.exists()
    for n in range(5):
        stored = raw.get_entity_payload(table, "p", f"legacy{n}")
        assert protocol_of(stored) == PROTOCOL_AUTHENTICATED
        assert read_as(raw, table, f"legacy{n}")["Name"] == f"name{n}"
    assert read_as(raw, table, "new")["Name"] == "fresh"
    assert raw.get_entity(table, "p", "plain")["Name"] == "open"
    again = run_cli("reencrypt", table, "--encryption-key-file", str(key_file), "--state-file", str(state),
                    connection_string=cli_connection_string)
    assert "re-encrypted 0 of 7" in again.stderr.decode()
    no_key = run_cli("reencrypt", table, connection_string=cli_connection_string)
    assert no_key.returncode != 0 and b"--encryption-key-file" in no_key.stderr


class _Stop(Exception):
    pass


def reencrypt_table_until(raw: CloudTableClient, table: str, state: Path, stop_after: int) -> ReencryptState:
    """A run stopped (an exception) after ``stop_after`` entities, pages of two: what its state file holds."""
    def stop(now: ReencryptState) -> None:
        if now.counts["scanned"] == stop_after:
            raise _Stop()

    with pytest.raises(_Stop):
        reencrypt_table(raw, table, AUTHENTICATED, state_path=str(state), progress=stop, page_size=2)
    return ReencryptState.load(str(state), table, None)


def test_a_concurrent_write_during_reencrypt_is_never_lost(raw: CloudTableClient, tables: tuple[str, str]) -> None:
    table = tables[0]
    write(raw, table, LEGACY, "hot", "before")
    write(raw, table, LEGACY, "cold", "still")
    at_replace, written = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            assert at_replace.wait(60), "the re-encryption never reached its replace"
            hot = DynamicEntity(PartitionKey="p", RowKey="hot", Name="after", Ward="w", etag="*")
            raw.update_entity(table, hot, mode="replace", options=TableRequestOptions(encryption_policy=LEGACY))
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            errors.append(error)
        finally:
            written.set()

    def before_replace(pk: str, rk: str) -> None:
        if rk == "hot" and not at_replace.is_set():  # the first attempt only: the writer goes in between
            at_replace.set()
            assert written.wait(60), "the writer never wrote"

    thread = threading.Thread(target=writer)
    thread.start()
    state = reencrypt_table(raw, table, AUTHENTICATED, before_replace=before_replace)
    thread.join()
    assert errors == []
    assert (state.counts["reencrypted"], state.counts["retried"]) == (2, 1)
    hot = raw.get_entity_payload(table, "p", "hot")
    assert protocol_of(hot) == PROTOCOL_AUTHENTICATED and read_as(raw, table, "hot")["Name"] == "after"
    assert read_as(raw, table, "cold")["Name"] == "still"
    assert read_as(raw, table, "hot")["Ward"] == "w"

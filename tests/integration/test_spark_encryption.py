"""Client-side encryption in the azuretables Spark source: the policy registered with the session
decrypts reads and encrypts writes on the Python workers, a session without one refuses an
encrypted entity, and the key is in no plan, option or log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import tablesdk.spark
from engine_crypto_data import KEY_TEXTS, POLICY, decrypted_rows, fill_encrypted, stored_is_ciphertext
from test_spark import client_of, devstore, load, target  # noqa: F401 - the module's stores
from tablesdk import CloudTableClient

pytestmark = pytest.mark.integration

COLUMNS = ("PartitionKey", "RowKey", "N", "Name", "Secret")


@pytest.fixture
def encrypted_session(spark: SparkSession) -> Iterator[SparkSession]:  # noqa: F811
    tablesdk.spark.register(spark, encryption_policy=POLICY)
    try:
        yield spark
    finally:
        tablesdk.spark.register(spark)


@pytest.fixture
def tables(target: str) -> Iterator[tuple[CloudTableClient, str, str]]:  # noqa: F811
    import uuid

    with client_of(target) as client:
        name = f"tsparkenc{uuid.uuid4().hex[:12]}"
        fill_encrypted(client, name)
        client.create_table(name + "w")
        try:
            yield client, name, name + "w"
        finally:
            client.delete_table_if_exists(name)
            client.delete_table_if_exists(name + "w")


def rows_of(frame: object) -> list[dict[str, object]]:
    rows = [{k: row[k] for k in COLUMNS} for row in frame.collect()]  # type: ignore[attr-defined]
    return sorted(rows, key=lambda row: (row["PartitionKey"], row["RowKey"]))


def test_a_registered_policy_reads_and_writes_encrypted(
    encrypted_session: SparkSession, target: str, tables: tuple[CloudTableClient, str, str]  # noqa: F811
) -> None:
    client, name, copy = tables
    frame = load(encrypted_session, target, name, boundaries='["p3", "p6"]')
    assert "_ClientEncryptionMetadata1" not in frame.columns
    assert rows_of(frame) == decrypted_rows(client, name)
    narrow = load(encrypted_session, target, name, columns="Secret")
    assert sorted(row.Secret for row in narrow.collect()) == sorted(f"s{n}" for n in range(40))
    frame.select(*COLUMNS).write.format("azuretables").option("connectionString", target).option("table", copy) \
        .option("encryptColumns", "Secret").mode("append").save()
    assert stored_is_ciphertext(client, copy)
    assert decrypted_rows(client, copy) == decrypted_rows(client, name)


def test_a_session_without_a_policy_refuses_an_encrypted_table(
    spark: SparkSession, target: str, tables: tuple[CloudTableClient, str, str]  # noqa: F811
) -> None:
    _, name, copy = tables
    with pytest.raises(Exception, match="encryption_policy="):
        load(spark, target, name)  # the sample meets the metadata
    given = spark.read.format("azuretables").option("connectionString", target).option("table", name) \
        .schema("PartitionKey string, RowKey string, Secret binary").load()
    with pytest.raises(Exception, match="encryption_policy="):
        given.collect()
    plain = spark.createDataFrame([("p", "r", "s")], "PartitionKey string, RowKey string, Secret string")
    with pytest.raises(Exception, match="encryption_policy"):
        plain.write.format("azuretables").option("connectionString", target).option("table", copy) \
            .option("encryptColumns", "Secret").mode("append").save()


def test_the_key_is_in_no_plan_and_no_log(
    encrypted_session: SparkSession, target: str, tables: tuple[CloudTableClient, str, str],  # noqa: F811
    spark_log: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    _, name, copy = tables
    frame = load(encrypted_session, target, name).filter("N > 3")
    frame.explain(True)
    frame.explain("formatted")
    frame.collect()
    frame.select(*COLUMNS).write.format("azuretables").option("connectionString", target).option("table", copy) \
        .option("encryptColumns", "Secret").mode("append").save()
    shown = capsys.readouterr().out
    execution = frame._jdf.queryExecution()
    texts = [shown, execution.toString(), execution.logical().toString(), execution.executedPlan().toString(),
             spark_log.read_text(encoding="utf-8", errors="replace")]
    assert "azuretables" in shown
    for text in texts:
        for secret in KEY_TEXTS:
            assert secret not in text

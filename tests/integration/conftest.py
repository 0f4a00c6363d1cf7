"""One parametrised client fixture over every integration target.

Targets: ``azurite-json`` (Azurite 3.37.0, started by the session fixture in
tests/conftest.py) and the bundled emulator (``tablesdk.testing``'s session
fixture) in both formats: ``devstore-json`` and ``devstore-atom``. Each test gets a fresh lower-case table that is deleted afterwards.

The fault tests (test_fault_tolerance.py, test_async_faults.py) talk to Azurite only, through
a :class:`faults.FaultProxy` (``proxy``), and read the outcome through ``direct`` in the table
``fault_table_name``; their shared settings and helpers are in fault_support.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import FaultProxy

from tablesdk import CloudStorageAccount, CloudTableClient

TARGETS = ["azurite-json", "devstore-json", "devstore-atom"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def connection_string(target: str, request: pytest.FixtureRequest) -> str:
    if target.startswith("azurite"):
        return str(request.getfixturevalue("azurite_connection_string"))
    return str(request.getfixturevalue("devstore_connection_string"))


@pytest.fixture
def client(target: str, connection_string: str) -> Iterator[CloudTableClient]:
    payload_format = target.rsplit("-", 1)[1]
    account = CloudStorageAccount.parse(connection_string)
    with account.create_cloud_table_client(payload_format=payload_format) as table_client:
        yield table_client


@pytest.fixture
def table(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    client.create_table(unique_table_name)
    yield unique_table_name
    client.delete_table_if_exists(unique_table_name)


@pytest.fixture
def direct(azurite_connection_string: str) -> Iterator[CloudTableClient]:
    """A client that talks to Azurite directly, not through the fault proxy: the referee."""
    with CloudStorageAccount.parse(azurite_connection_string).create_cloud_table_client() as client:
        yield client


@pytest.fixture
def fault_table_name(direct: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    """A fresh table on Azurite, created and deleted through ``direct``."""
    direct.create_table(unique_table_name)
    yield unique_table_name
    direct.delete_table_if_exists(unique_table_name)


@pytest.fixture
def proxy(azurite_endpoint: str) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of Azurite (it stops itself after two minutes at the most)."""
    with FaultProxy(azurite_endpoint, lifetime=120.0) as p:
        yield p


@pytest.fixture(scope="session")
def spark_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the Spark driver writes its log (INFO and above), to search for secrets."""
    return tmp_path_factory.mktemp("spark") / "spark.log"


@pytest.fixture(scope="session")
def spark(spark_log: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] Spark session for every test module: the driver's JVM lives as long as the test
    process, so its log configuration is set once, by the first session, and a second session
    would write to the first one's log."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    import tablesdk.spark

    config = tmp_path_factory.mktemp("log4j") / "log4j2.properties"
    config.write_text(
        "rootLogger.level = info\nrootLogger.appenderRef.file.ref = file\n"
        f"appender.file.type = File\nappender.file.name = file\nappender.file.fileName = {spark_log}\n"
        "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = %d %p %c: %m%n\n",
        encoding="utf-8",
    )
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers import this checkout's tablesdk and pyarrow
    session = (
        SparkSession.builder.master("local[2]").appName("tablesdk-spark-tests")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{config}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    tablesdk.spark.register(session)
    yield session
    session.stop()

"""One parametrised client fixture over every integration target.

Targets: ``azurite-json`` (Azurite 3.37.0, started by the session fixture in
tests/conftest.py) and the bundled emulator (``tablesdk.testing``'s session
fixture) in both formats: ``devstore-json`` and ``devstore-atom``. Each test gets a fresh lower-case table that is deleted afterwards.

The fault tests (test_fault_tolerance.py, test_async_faults.py) talk to Azurite only, through
a :class:`faults.FaultProxy` (``proxy``), and read the outcome through ``direct`` in the table
``fault_table_name``; their shared settings and helpers are in fault_support.py.
"""

from __future__ import annotations

from collections.abc import Iterator

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

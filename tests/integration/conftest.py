"""One parametrised client fixture over every integration target.

Targets: ``azurite-json`` (Azurite 3.37.0, started by the session fixture in
tests/conftest.py) and the bundled emulator (``tablesdk.testing``'s session
fixture) in both formats: ``devstore-json`` and ``devstore-atom``. Each test gets a fresh lower-case table that is deleted afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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

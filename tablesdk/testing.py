"""pytest fixtures for testing code that uses tablesdk, backed by the bundled emulator.

Enable them in your own suite with one line in ``conftest.py``::

    pytest_plugins = ["tablesdk.testing"]

Fixtures:

* ``devstore`` (session): a running :class:`~tablesdk.devstore.DevStore` on a free
  loopback port, stopped at the end of the session;
* ``devstore_connection_string`` (session): its connection string;
* ``devstore_account`` (session): a :class:`~tablesdk.CloudStorageAccount` for it;
* ``table_client`` (function): a JSON :class:`~tablesdk.CloudTableClient` on it,
  closed after the test; every table is dropped after each test that used it,
  so tests do not see each other's data.

The emulator pages queries at ``TABLESDK_DEVSTORE_PAGE_SIZE`` entities (default
1000, the service's own page size); set it low to exercise continuation paging.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ._core._account import CloudStorageAccount
from ._clients._client import CloudTableClient
from .devstore import DevStore

__all__ = ["devstore", "devstore_connection_string", "devstore_account", "table_client"]


@pytest.fixture(scope="session")
def devstore() -> Iterator[DevStore]:
    """A bundled emulator serving on a free loopback port for the whole session."""
    page_size = int(os.environ.get("TABLESDK_DEVSTORE_PAGE_SIZE", "1000"))
    with DevStore(port=0, page_size=page_size) as store:
        yield store


@pytest.fixture(scope="session")
def devstore_connection_string(devstore: DevStore) -> str:
    """The connection string of the session's emulator."""
    return devstore.connection_string


@pytest.fixture(scope="session")
def devstore_account(devstore_connection_string: str) -> CloudStorageAccount:
    """A :class:`CloudStorageAccount` for the session's emulator."""
    return CloudStorageAccount.parse(devstore_connection_string)


@pytest.fixture
def table_client(devstore: DevStore, devstore_account: CloudStorageAccount) -> Iterator[CloudTableClient]:
    """A JSON client on the emulator; the emulator is emptied after the test."""
    with devstore_account.create_cloud_table_client() as client:
        yield client
    devstore.reset()

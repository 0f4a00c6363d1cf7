"""Fixtures for the devstore tests: one running emulator per session and a signed client."""

from __future__ import annotations

import uuid
from typing import Iterator

import pytest

from devstore_helpers import Client
from tablesdk.devstore import DevStore


@pytest.fixture(scope="session")
def store() -> Iterator[DevStore]:
    with DevStore(port=0, page_size=1000) as running:
        yield running


@pytest.fixture(scope="session")
def client(store: DevStore) -> Client:
    return Client(store)


@pytest.fixture
def table(client: Client) -> str:
    name = "t" + uuid.uuid4().hex[:16]
    resp = client.create_table(name)
    assert resp.status_code == 201, resp.text
    return name

"""user_agent= puts the application's token ahead of tablesdk's, as the Azure SDKs do (issue 27.5)."""

from __future__ import annotations

import asyncio
import platform
import re
import sys

import pytest

from tablesdk import CloudStorageAccount, HttpRequest, HttpResponse, MockSender, TableValidationError, __version__
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

ACCOUNT = CloudStorageAccount.parse(
    f"DefaultEndpointsProtocol=http;AccountName={DEVSTORE_ACCOUNT};AccountKey={DEVSTORE_KEY};"
    f"TableEndpoint=http://127.0.0.1:1/{DEVSTORE_ACCOUNT}"
)
PYTHON = "%d.%d.%d" % sys.version_info[:3]


def _sent_user_agent(**options: object) -> str:
    seen: list[HttpRequest] = []

    def answer(request: HttpRequest) -> HttpResponse:
        seen.append(request)
        return MockSender.response(204)

    client = ACCOUNT.create_cloud_table_client(sender=MockSender(answer), **options)
    client.create_table("Agents")
    value = seen[0].header("User-Agent")
    assert value is not None
    return value


def test_default_user_agent_names_sdk_python_and_platform() -> None:
    assert _sent_user_agent() == f"tablesdk/{__version__} Python/{PYTHON} ({platform.platform(terse=True)})"


def test_application_token_comes_first() -> None:
    value = _sent_user_agent(user_agent="orders-api/2.1")
    assert re.fullmatch(rf"orders-api/2\.1 tablesdk/{re.escape(__version__)} Python/{PYTHON} \(.+\)", value)


@pytest.mark.parametrize("bad", ["", "   ", "line\r\nbreak", "naïve", "x" * 257])
def test_user_agent_that_is_no_header_value_is_refused(bad: str) -> None:
    with pytest.raises(TableValidationError, match="user_agent"):
        ACCOUNT.create_cloud_table_client(user_agent=bad)


def test_async_client_sends_the_same_user_agent() -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    seen: list[HttpRequest] = []

    class Recording:
        async def send(self, request: HttpRequest, timeout: object) -> HttpResponse:
            seen.append(request)
            return MockSender.response(204)

        async def close(self) -> None:
            pass

    async def run() -> None:
        async with AsyncCloudTableClient(ACCOUNT, sender=Recording(), user_agent="jobs/1") as client:
            await client.create_table("Agents")

    asyncio.run(run())
    assert seen[0].header("User-Agent") == f"jobs/1 tablesdk/{__version__} Python/{PYTHON} ({platform.platform(terse=True)})"

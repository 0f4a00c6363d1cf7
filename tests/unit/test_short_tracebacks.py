"""A failed call's traceback starts at the caller's call and is short (issue 23.4).

The flows are generators driven by ``run_flow``; an error used to carry every frame of
the transport and of each generator it was thrown through, and a failed ``save_changes``
printed two such tracebacks ("During handling of the above exception..."). The error a
user sees now comes from their call, with the per-change error as its only cause.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from tablesdk import (
    BatchError, CloudStorageAccount, ConflictError, DataServiceRequestError, DynamicEntity, NoRetry,
    SaveChangesOptions,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout

CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1"
)
EXISTS = json.dumps({"odata.error": {"code": "EntityAlreadyExists", "message": {"value": "0:The entity exists."}}})

#: The caller's frame, the tracing wrapper and the public method (two more for a client
#: method: its ``_run`` and ``run_flow`` stay, but no transport or generator frame).
SAVE_FRAMES = 3
CALL_FRAMES = 5


def conflict(request: HttpRequest) -> HttpResponse:
    """Every write is refused 409; a batch is refused at its first operation."""
    if "$batch" not in request.url:
        return MockSender.response(409, EXISTS, {"Content-Type": "application/json"})
    body = (
        "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
        "--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        "HTTP/1.1 409 Conflict\r\nContent-ID: 1\r\nContent-Type: application/json\r\n\r\n"
        f"{EXISTS}\r\n--changesetresponse_1--\r\n--batchresponse_1--\r\n"
    )
    return MockSender.response(202, body, {"Content-Type": "multipart/mixed; boundary=batchresponse_1"})


def chain(error: BaseException) -> list[traceback.TracebackException]:
    """The exceptions ``format_exception`` prints for ``error``, outermost first."""
    shown = [traceback.TracebackException.from_exception(error)]
    while True:
        last = shown[-1]
        following = last.__cause__ or (None if last.__suppress_context__ else last.__context__)
        if following is None:
            return shown
        shown.append(following)


def assert_short(error: BaseException, caller: str, max_frames: int) -> None:
    """At most one chained exception, and at most ``max_frames`` frames from ``caller``'s on."""
    printed = chain(error)
    text = "".join(traceback.format_exception(error))
    assert len(printed) <= 2, text
    names = [frame.name for frame in printed[0].stack]
    assert caller in names, text
    frames = len(names) - names.index(caller) + sum(len(exc.stack) for exc in printed[1:])
    assert frames <= max_frames, text
    assert "_f_save" not in text and "_transport.py" not in text, text
    assert "During handling of the above exception" not in text, text


SAVES: dict[str, tuple[SaveChangesOptions, bool]] = {
    "none": (SaveChangesOptions.NONE, False),
    "continue": (SaveChangesOptions.CONTINUE_ON_ERROR, False),
    "batch": (SaveChangesOptions.BATCH, False),
    "with_retries": (SaveChangesOptions.NONE, True),
    "batch_with_retries": (SaveChangesOptions.BATCH, True),
}


def check_save_error(error: BaseException, options: SaveChangesOptions) -> None:
    assert isinstance(error, DataServiceRequestError)
    assert error.status_code == 409
    if SaveChangesOptions.BATCH in options:
        assert isinstance(error.__cause__, BatchError) and error.__cause__.failed_index == 0
    else:
        assert isinstance(error.__cause__, ConflictError)
        assert error.__cause__ is error.response[0].error  # the first change's own error
    assert error.__cause__.__traceback__ is None  # only the transport and the flows were in it


@pytest.mark.parametrize("case", SAVES)
def test_a_failed_save_is_raised_from_the_callers_call(case: str) -> None:
    options, retries = SAVES[case]
    client = CloudStorageAccount.parse(CONN).create_cloud_table_client(
        sender=MockSender(conflict), retry_policy=NoRetry())
    ctx = client.get_table_service_context()
    ctx.add_object("Tasks", DynamicEntity("p", "r1"))
    ctx.add_object("Tasks", DynamicEntity("p", "r2"))

    def callers_call() -> None:
        if retries:
            ctx.save_changes_with_retries(options, NoRetry())
        else:
            ctx.save_changes(options)

    with pytest.raises(DataServiceRequestError) as info:
        callers_call()
    check_save_error(info.value, options)
    assert_short(info.value, "callers_call", SAVE_FRAMES)


def test_a_failed_client_call_is_raised_from_the_callers_call() -> None:
    client = CloudStorageAccount.parse(CONN).create_cloud_table_client(
        sender=MockSender(conflict), retry_policy=NoRetry())

    def callers_call() -> None:
        client.insert_entity("Tasks", DynamicEntity("p", "r"))

    with pytest.raises(ConflictError) as info:
        callers_call()
    assert_short(info.value, "callers_call", CALL_FRAMES)


def test_an_sdk_bug_keeps_its_whole_traceback() -> None:
    """Only the SDK's own errors are shortened: a bug's frames are what finds it."""
    def broken(request: HttpRequest) -> HttpResponse:
        raise KeyError("a bug in a sender")

    client = CloudStorageAccount.parse(CONN).create_cloud_table_client(
        sender=MockSender(broken), retry_policy=NoRetry())
    with pytest.raises(KeyError) as info:
        client.insert_entity("Tasks", DynamicEntity("p", "r"))
    assert "broken" in "".join(traceback.format_exception(info.value))


class AsyncSender:
    def __init__(self, handler: Callable[[HttpRequest], HttpResponse]) -> None:
        self.handler = handler

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        return self.handler(request)

    async def close(self) -> None:
        pass


def run_async(body: Callable[[Any], Any]) -> BaseException:
    pytest.importorskip("aiohttp")

    async def run() -> BaseException:
        aclient = CloudStorageAccount.parse(CONN).create_async_cloud_table_client(
            sender=AsyncSender(conflict), retry_policy=NoRetry())
        try:
            await body(aclient)
        except Exception as exc:  # noqa: BLE001 - the test inspects whatever it was
            return exc
        finally:
            await aclient.close()
        raise AssertionError("expected an error")

    return asyncio.run(run())


@pytest.mark.parametrize("case", SAVES)
def test_a_failed_async_save_is_raised_from_the_callers_call(case: str) -> None:
    options, retries = SAVES[case]

    async def callers_call(aclient: Any) -> None:
        ctx = aclient.get_table_service_context()
        ctx.add_object("Tasks", DynamicEntity("p", "r1"))
        ctx.add_object("Tasks", DynamicEntity("p", "r2"))
        if retries:
            await ctx.save_changes_with_retries(options, NoRetry())
        else:
            await ctx.save_changes(options)

    error = run_async(callers_call)
    check_save_error(error, options)
    assert_short(error, "callers_call", SAVE_FRAMES)


def test_a_failed_async_client_call_is_raised_from_the_callers_call() -> None:
    async def callers_call(aclient: Any) -> None:
        await aclient.insert_entity("Tasks", DynamicEntity("p", "r"))

    error = run_async(callers_call)
    assert isinstance(error, ConflictError)
    assert_short(error, "callers_call", CALL_FRAMES)

"""``import tablesdk`` loads only what every call needs (issue 25.5).

The codecs, HTTP stack, command line and optional integrations load when a call
first needs them. Checked in a fresh interpreter, where nothing else has
imported them yet.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loopback import unused_port

#: Top-level packages ``import tablesdk`` must not import.
NOT_AT_IMPORT = (
    "lxml", "dateutil", "click", "rich", "aiohttp", "pyarrow", "pandas", "dask", "opentelemetry",
    "requests", "urllib3", "ray", "polars", "duckdb", "pyspark", "py4j", "cryptography",
)


#: Standard-library modules that only some calls need, loaded by those calls (start-up): logging by
#: the first logger, concurrent.futures by the first thread pool, hashlib and hmac by the first
#: signature, traceback and tempfile by the command line's --debug and export, random by the first
#: retry policy, decimal by the first Decimal field or double in a filter.
STDLIB_NOT_AT_IMPORT = (
    "logging", "concurrent.futures", "hashlib", "hmac", "traceback", "tempfile", "random", "decimal",
)


def loaded_by(statement: str, modules: tuple[str, ...]) -> set[str]:
    """The ``modules`` (full names) in ``sys.modules`` after ``statement``, in a fresh interpreter."""
    script = f"import sys\n{statement}\nprint(sorted(set(sys.modules) & set({list(modules)!r})))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1].replace("'", '"')))


def imported_by(statement: str) -> set[str]:
    """The top-level packages of ``NOT_AT_IMPORT`` that ``statement`` imports in a fresh interpreter."""
    script = (
        f"import sys\n{statement}\n"
        "import json\n"
        f"print(json.dumps(sorted({{name.split('.')[0] for name in sys.modules}} & set({list(NOT_AT_IMPORT)!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_import_tablesdk_loads_no_codec_http_stack_or_extra() -> None:
    assert imported_by("import tablesdk") == set()


def test_import_tablesdk_aio_loads_no_http_library() -> None:
    # aiohttp comes with an async client's first request, when its sender is made (start-up)
    assert imported_by("import tablesdk.aio") == set()


def test_an_async_client_loads_aiohttp_with_its_first_request_not_when_made() -> None:
    port = unused_port()
    statement = (
        "import asyncio, sys\n"
        "from tablesdk import CloudStorageAccount, ConnectionFailedError, NoRetry\n"
        "from tablesdk.aio import AsyncCloudTableClient\n"
        "dev = CloudStorageAccount.development_storage_account()\n"
        f"account = CloudStorageAccount(dev.account_name, dev.table_endpoint.replace('10002', '{port}'), dev.credential)\n"
        "async def first_request() -> None:\n"
        "    async with AsyncCloudTableClient(account, retry_policy=NoRetry()) as client:\n"
        "        if 'aiohttp' in sys.modules:\n"
        "            raise SystemExit('making the client imported aiohttp')\n"
        "        try:\n"
        "            await client.table_exists('Probe')\n"
        "        except ConnectionFailedError:\n"
        "            pass\n"
        "asyncio.run(first_request())\n"
    )
    assert "aiohttp" in imported_by(statement)


def test_the_async_sender_resolves_when_named() -> None:
    assert "aiohttp" not in imported_by("from tablesdk.aio import AsyncSender, AiohttpSender")
    assert "aiohttp" in imported_by("from tablesdk.aio import AiohttpSender\nAiohttpSender()")


def test_the_default_sender_brings_requests_when_named() -> None:
    assert imported_by("from tablesdk import RequestsSender") == {"requests", "urllib3"}
    assert imported_by("import tablesdk; tablesdk.RequestsSender") == {"requests", "urllib3"}


def test_service_properties_bring_lxml_when_read() -> None:
    statement = (
        "import tablesdk._clients._service as s\n"
        "s.parse_service_stats(b'<StorageServiceStats><GeoReplication><Status>live</Status>"
        "</GeoReplication></StorageServiceStats>')"
    )
    assert "lxml" in imported_by(statement)


def test_cli_help_loads_no_rich_nor_http_stack() -> None:
    statement = "from tablesdk.cli import main\nassert main(['--help']) == 0"
    assert imported_by(statement) == {"click"}


def test_cli_without_its_extra_says_how_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tablesdk.cli import INSTALL_HINT, main

    monkeypatch.setitem(sys.modules, "rich", None)  # what find_spec reports for a missing package
    assert main(["--help"]) == 2
    err = capsys.readouterr().err
    assert "rich is not installed" in err and INSTALL_HINT in err


def test_import_tablesdk_loads_no_standard_module_only_some_calls_need() -> None:
    assert loaded_by("import tablesdk", STDLIB_NOT_AT_IMPORT) == set()


def test_cli_help_loads_no_standard_module_only_some_commands_need() -> None:
    statement = "from tablesdk.cli import main\nassert main(['--help']) == 0"
    assert loaded_by(statement, STDLIB_NOT_AT_IMPORT) == set()


def test_the_calls_that_need_them_load_them() -> None:
    # the check above can fail: these statements load what it looks for
    signed = "import tablesdk._core._auth as a\na._sign(b'k', 'text')"
    assert loaded_by(signed, STDLIB_NOT_AT_IMPORT) == {"hashlib", "hmac"}
    logged = "import tablesdk._core._redaction as r\nr.library_logger('tablesdk.x')"
    assert loaded_by(logged, STDLIB_NOT_AT_IMPORT) >= {"logging"}
    pooled = (
        "import tablesdk\n"
        "client = tablesdk.CloudStorageAccount.development_storage_account().create_cloud_table_client()\n"
        "client.executor()\n"
    )
    assert "concurrent.futures" in loaded_by(pooled, STDLIB_NOT_AT_IMPORT)


def test_the_package_logger_gets_its_null_handler_with_the_first_logger() -> None:
    statement = (
        "import logging, tablesdk._core._redaction as r\n"
        "assert not logging.getLogger('tablesdk').handlers\n"
        "r.library_logger('tablesdk.transport')\nr.library_logger('tablesdk.other')\n"
        "assert [type(h).__name__ for h in logging.getLogger('tablesdk').handlers] == ['NullHandler']\n"
    )
    assert loaded_by(statement, ("logging",)) == {"logging"}


#: Our own modules few programs need: the bulk loader, the service-level settings (XML), the batch
#: answer reader (multipart patterns). Their public names resolve when first named.
OWN_NOT_AT_IMPORT = ("tablesdk._bulk_loading._bulk", "tablesdk._clients._service", "tablesdk._formats._batch_answer")


def test_import_tablesdk_leaves_the_bulk_loader_service_settings_and_batch_answers() -> None:
    assert loaded_by("import tablesdk", OWN_NOT_AT_IMPORT) == set()


def test_their_public_names_load_them_when_named() -> None:
    assert loaded_by("from tablesdk import BulkResult", OWN_NOT_AT_IMPORT) == {"tablesdk._bulk_loading._bulk"}
    assert loaded_by("import tablesdk; tablesdk.ServiceStats", OWN_NOT_AT_IMPORT) == {"tablesdk._clients._service"}
    statement = (
        "import tablesdk, tablesdk._bulk_loading._bulk as b, tablesdk._clients._service as s\n"
        "assert tablesdk.EntityOutcome is b.EntityOutcome and tablesdk.CorsRule is s.CorsRule\n"
        "assert {'BulkInsertError', 'ServiceProperties', 'RequestsSender'} <= set(dir(tablesdk))\n"
        "namespace = {}\nexec('from tablesdk import *', namespace)\n"
        "assert set(tablesdk.__all__) <= set(namespace)\n"
    )
    assert loaded_by(statement, OWN_NOT_AT_IMPORT) == {"tablesdk._bulk_loading._bulk", "tablesdk._clients._service"}


def test_cli_help_leaves_the_commands_work_to_the_commands() -> None:
    work = ("tablesdk.cli._export", "tablesdk.cli._parquet", "tablesdk.cli._transfer", "tablesdk._columns._arrow")
    statement = "from tablesdk.cli import main\nassert main(['--help']) == 0"
    assert loaded_by(statement, work) == set()
    assert loaded_by(statement.replace("'--help'", "'export', '--help'"), work) == set()


def test_a_json_lines_export_leaves_arrow_and_the_bulk_loader_to_parquet_exports() -> None:
    work = ("tablesdk.cli._export", "tablesdk.cli._parquet", "tablesdk._columns._arrow", "tablesdk._bulk_loading._bulk")
    statement = (
        "import tablesdk.cli._export as export\n"
        "export.export_table = lambda *args, **kwargs: 0  # no service: the command's imports are what is checked\n"
        "from tablesdk.cli import main\n"
        "assert main(['--dev', '--no-progress', 'export', 'sometable', '-']) == 0"
    )
    assert loaded_by(statement, work) == {"tablesdk.cli._export"}


def test_an_async_client_without_aiohttp_says_so_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from tablesdk import CloudStorageAccount
    from tablesdk.aio import AsyncCloudTableClient

    monkeypatch.setitem(sys.modules, "aiohttp", None)  # what find_spec reports for a missing package
    with pytest.raises(ImportError, match="tablesdk.aio needs aiohttp"):
        AsyncCloudTableClient(CloudStorageAccount.development_storage_account())

"""The explorer page in a real browser (headless Chromium over the DevTools pipe).

Each action is done through the page, as a user does it (real mouse clicks and typed text),
and its result is checked through the SDK against the same emulator.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from chromium import Browser, find_chromium
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

_TRUE = {"1", "true", "yes", "on"}


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        message = ("Chromium is not installed (apt-get install chromium; scripts/test.sh installs it in CI), "
                   "or set TABLESDK_CHROMIUM to its path")
        if os.environ.get("CI", "").strip().lower() in _TRUE:
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with Browser(chromium) as running:
        yield running


@pytest.fixture(scope="module")
def store() -> Iterator[DevStore]:
    with DevStore(port=0) as running:
        yield running


@pytest.fixture(scope="module")
def sdk(store: DevStore) -> CloudTableClient:
    return CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()


@pytest.fixture
def page(browser: Browser, store: DevStore) -> Browser:
    """The explorer, freshly loaded, with its tables listed; no dialog seen yet."""
    browser.dialogs.clear()
    browser.console.clear()
    browser.goto(store.explorer_url)
    browser.wait_for("document.body.dataset.ready === 'true'")
    return browser


def _name() -> str:
    return "x" + uuid.uuid4().hex[:12]


def act(page: Browser, selector: str, value: str | None = None) -> None:
    """Click a control (or choose ``value`` of a select) and wait until the page's action has finished."""
    before = page.evaluate("Number(document.body.dataset.done || 0)")
    if value is None:
        page.click(selector)
    else:
        page.select(selector, value)
    page.wait_for(f"Number(document.body.dataset.done) > {before} && document.body.dataset.busy === 'false'")


def _open_table(page: Browser, table: str) -> None:
    act(page, "#refresh-tables")
    act(page, f"#table-list button[data-table={json.dumps(table)}]")
    assert page.text("#table-title") == table


def _rows(page: Browser) -> list[dict[str, list[str]]]:
    """The grid: per row, property -> [text, EDM type]."""
    rows: list[dict[str, list[str]]] = page.evaluate("""Array.from(document.querySelectorAll('#entities tbody tr'))
        .map(row => Object.fromEntries(Array.from(row.querySelectorAll('td[data-property]'))
            .map(cell => [cell.dataset.property, [cell.querySelector('.value').textContent, cell.dataset.type]])))""")
    return rows


def _wait_rows(page: Browser, count: int) -> list[dict[str, list[str]]]:
    page.wait_for(f"document.querySelectorAll('#entities tbody tr').length === {count}")
    return _rows(page)


def _fill_property(page: Browser, index: int, name: str, edm: str, value: str) -> None:
    row = f"#edit-props tr:nth-child({index + 1})"
    page.type(f"{row} .prop-name", name)
    page.select(f"{row} .prop-type", edm)  # no handler: a plain choice
    page.type(f"{row} .prop-value", value)


def test_create_table_through_the_page(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    page.type("#new-table-name", table)
    act(page, "#create-table")
    page.wait_for(f"document.querySelector('#table-title').textContent === {json.dumps(table)}")
    assert sdk.table_exists(table)
    assert page.visible(f"#table-list button[data-table={json.dumps(table)}]")


def test_a_refused_table_name_shows_the_services_error(page: Browser, store: DevStore) -> None:
    page.type("#new-table-name", "1bad-name")
    act(page, "#create-table")
    message = page.wait_for("document.querySelector('#tables-error').textContent")
    assert "400 InvalidResourceName" in message
    assert "1bad-name" not in store.table_names()


def test_insert_an_entity_with_typed_values(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    _open_table(page, table)
    act(page, "#insert-entity")
    page.type("#edit-pk", "people")
    page.type("#edit-rk", "ann")
    values = [
        ("Name", "Edm.String", "Ann"), ("Age", "Edm.Int32", "31"), ("Big", "Edm.Int64", "9007199254740993"),
        ("Ratio", "Edm.Double", "2"), ("Active", "Edm.Boolean", "true"),
        ("Born", "Edm.DateTime", "1993-05-01T12:30:00Z"), ("Id", "Edm.Guid", "6f9619ff-8b86-d011-b42d-00c04fc964ff"),
        ("Blob", "Edm.Binary", "AQID"),
    ]
    for index, (name, edm, value) in enumerate(values):
        if index:
            act(page, "#add-property")
        _fill_property(page, index, name, edm, value)
    act(page, "#save-entity")
    rows = _wait_rows(page, 1)

    entity = sdk.get_entity(table, "people", "ann")
    assert entity["Name"] == "Ann" and entity.edm_type("Name") == EdmType.STRING
    assert entity["Age"] == 31 and entity.edm_type("Age") == EdmType.INT32
    assert entity["Big"] == 9007199254740993 and entity.edm_type("Big") == EdmType.INT64
    assert entity["Ratio"] == 2.0 and entity.edm_type("Ratio") == EdmType.DOUBLE
    assert entity["Active"] is True and entity.edm_type("Active") == EdmType.BOOLEAN
    assert entity["Born"] == datetime(1993, 5, 1, 12, 30, tzinfo=timezone.utc)
    assert entity.edm_type("Born") == EdmType.DATETIME
    assert str(entity["Id"]) == "6f9619ff-8b86-d011-b42d-00c04fc964ff" and entity.edm_type("Id") == EdmType.GUID
    assert entity["Blob"] == b"\x01\x02\x03" and entity.edm_type("Blob") == EdmType.BINARY
    # the grid shows each value with the type the service gave it (a whole Double stays a Double)
    shown = rows[0]
    assert shown["Big"] == ["9007199254740993", "Edm.Int64"]
    assert shown["Ratio"][1] == "Edm.Double" and shown["Age"] == ["31", "Edm.Int32"]
    assert shown["Active"] == ["true", "Edm.Boolean"] and shown["Blob"] == ["AQID", "Edm.Binary"]
    assert shown["Id"][1] == "Edm.Guid" and shown["Born"][1] == "Edm.DateTime"
    assert page.dialogs == []


def test_a_value_not_of_its_type_is_shown_at_the_field_and_nothing_is_sent(page: Browser,
                                                                           sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    _open_table(page, table)
    act(page, "#insert-entity")
    page.type("#edit-pk", "p")
    page.type("#edit-rk", "r")
    _fill_property(page, 0, "Count", "Edm.Int32", "twelve")
    act(page, "#save-entity")
    message = page.wait_for("document.querySelector('#edit-props tr .field-error').textContent")
    assert "Int32" in message
    assert page.evaluate("document.querySelector('#edit-props .prop-value').getAttribute('aria-invalid')") == "true"
    assert list(sdk.create_query(table)) == []


def test_edit_an_entity(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    sdk.insert_entity(table, DynamicEntity("p", "r", Count=1, Note="old", Gone="x"))
    _open_table(page, table)
    _wait_rows(page, 1)
    act(page, "#entities tbody tr .edit-entity")
    page.wait_for("!document.querySelector('#editor').hidden")
    assert page.evaluate("document.querySelector('#edit-pk').readOnly") is True
    names = page.evaluate("Array.from(document.querySelectorAll('#edit-props .prop-name')).map(n => n.value)")
    assert names == ["Count", "Note", "Gone"]
    count_row = names.index("Count")
    _fill_property(page, count_row, "Count", "Edm.Int64", "5000000000")
    page.type(f"#edit-props tr:nth-child({names.index('Note') + 1}) .prop-value", "new")
    act(page, f"#edit-props tr:nth-child({names.index('Gone') + 1}) .remove-property")
    act(page, "#save-entity")
    page.wait_for("document.querySelector('#editor').hidden")
    rows = _wait_rows(page, 1)

    entity = sdk.get_entity(table, "p", "r")
    assert entity["Count"] == 5000000000 and entity.edm_type("Count") == EdmType.INT64
    assert entity["Note"] == "new"
    assert "Gone" not in entity  # an edit replaces the entity: a removed property is gone
    assert rows[0]["Count"] == ["5000000000", "Edm.Int64"]


def test_an_edit_over_someone_elses_change_shows_the_412_and_changes_nothing(page: Browser,
                                                                           sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    sdk.insert_entity(table, DynamicEntity("p", "r", Note="read by the page"))
    _open_table(page, table)
    _wait_rows(page, 1)
    act(page, "#entities tbody tr .edit-entity")
    sdk.upsert_entity(table, DynamicEntity("p", "r", Note="changed meanwhile"))
    page.type("#edit-props .prop-value", "from the page")
    act(page, "#save-entity")
    assert page.text("#editor-error").startswith("412 UpdateConditionNotSatisfied")
    assert page.visible("#editor")
    assert sdk.get_entity(table, "p", "r")["Note"] == "changed meanwhile"


def test_delete_an_entity(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    for rk in ("a", "b"):
        sdk.insert_entity(table, DynamicEntity("p", rk))
    _open_table(page, table)
    _wait_rows(page, 2)
    act(page, "#entities tbody tr:first-child .delete-entity")
    assert page.text("#entities tbody tr:first-child .delete-entity") == "Confirm delete"
    assert [e.RowKey for e in sdk.create_query(table)] == ["a", "b"]  # one click only arms it
    act(page, "#entities tbody tr:first-child .delete-entity")
    rows = _wait_rows(page, 1)
    assert rows[0]["RowKey"][0] == "b"
    assert [e.RowKey for e in sdk.create_query(table)] == ["b"]


def test_filter_shows_the_services_error_where_it_is_and_then_filters(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    for n in range(8):
        sdk.insert_entity(table, DynamicEntity("p", f"{n:02d}", N=EntityProperty(n, EdmType.INT64)))
    _open_table(page, table)
    _wait_rows(page, 8)
    page.type("#filter", "N ge")
    act(page, "#apply-filter")
    message = page.wait_for("document.querySelector('#filter-error').textContent")
    assert message.startswith("400 InvalidInput")
    assert page.text("#table-error") == ""  # the error is at the filter box, not elsewhere
    page.type("#filter", "N ge 5L and PartitionKey eq 'p'")
    act(page, "#apply-filter")
    page.wait_for("document.querySelector('#filter-error').textContent === ''")
    rows = _wait_rows(page, 3)
    assert [row["RowKey"][0] for row in rows] == ["05", "06", "07"]
    expected = [e.RowKey for e in sdk.create_query(table).where("N ge 5L and PartitionKey eq 'p'")]
    assert expected == ["05", "06", "07"]


def test_paging_follows_the_continuation(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    keys = [f"{n:02d}" for n in range(12)]
    for rk in keys:
        sdk.insert_entity(table, DynamicEntity("p", rk))
    _open_table(page, table)
    act(page, "#page-size", "5")
    page.wait_for("document.querySelectorAll('#entities tbody tr').length === 5")
    seen = [row["RowKey"][0] for row in _rows(page)]
    assert page.evaluate("document.querySelector('#prev-page').disabled") is True
    for expected_count in (5, 2):
        act(page, "#next-page")
        page.wait_for(f"document.querySelectorAll('#entities tbody tr').length === {expected_count}"
                      f" && document.querySelector('#page-info').textContent.startsWith('page {len(seen) // 5 + 1}')")
        seen += [row["RowKey"][0] for row in _rows(page)]
    assert seen == keys == [e.RowKey for e in sdk.create_query(table)]
    assert page.evaluate("document.querySelector('#next-page').disabled") is True
    assert "last page" in page.text("#page-info")
    act(page, "#prev-page")
    page.wait_for("document.querySelector('#page-info').textContent.startsWith('page 2')")
    assert [row["RowKey"][0] for row in _rows(page)] == keys[5:10]


def test_delete_a_table(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    _open_table(page, table)
    act(page, "#delete-table")
    assert page.visible("#delete-table-confirm") and sdk.table_exists(table)
    act(page, "#delete-table-yes")
    page.wait_for(f"!document.querySelector('#table-list button[data-table={json.dumps(table)}]')"
                  " && document.querySelector('#table-pane').hidden")
    assert not sdk.table_exists(table)
    assert page.dialogs == []


PAYLOADS = {
    "Img": "<img src=x onerror=alert('img')>",
    "Script": "</script><script>alert('script')</script>",
    "Link": "javascript:alert('link')",
    "Svg": "\"><svg onload=alert('svg')>",
    "Entity": "&lt;b&gt;bold&lt;/b&gt; &amp;",
}


def test_html_and_script_payloads_are_shown_inert_and_literal(page: Browser, sdk: CloudTableClient) -> None:
    table = _name()
    sdk.create_table(table)
    row_key = "<img src=x onerror=alert('key')>"
    sdk.insert_entity(table, DynamicEntity("<b onmouseover=alert('pk')>pk", row_key, **PAYLOADS))
    _open_table(page, table)
    rows = _wait_rows(page, 1)
    assert rows[0]["RowKey"][0] == row_key
    assert rows[0]["PartitionKey"][0] == "<b onmouseover=alert('pk')>pk"
    for name, payload in PAYLOADS.items():
        assert rows[0][name] == [payload, "Edm.String"]
    # the values are text: no element was made from them, anywhere on the page
    assert page.evaluate("document.querySelectorAll('main img, main script, main svg, main b, main a').length") == 0
    act(page, "#entities tbody tr .edit-entity")
    page.wait_for("!document.querySelector('#editor').hidden")
    values = page.evaluate("Array.from(document.querySelectorAll('#edit-props .prop-value')).map(n => n.value)")
    assert values == list(PAYLOADS.values())
    assert page.evaluate("document.querySelector('#edit-rk').value") == row_key
    # a service error that quotes the payload is text too
    act(page, "#cancel-edit")
    page.type("#filter", "Img eq '<img src=x onerror=alert(1)>' and")
    act(page, "#apply-filter")
    page.wait_for("document.querySelector('#filter-error').textContent")
    assert page.evaluate("document.querySelectorAll('main img, main script, main svg, main b, main a').length") == 0
    assert page.evaluate("document.scripts.length") == 1  # only the page's own app.js
    assert page.dialogs == []
    assert not [line for line in page.console if line.startswith("exception")]


def test_connection_string_to_copy(page: Browser, store: DevStore) -> None:
    assert store.account_key not in page.evaluate("document.documentElement.outerHTML")
    act(page, "#show-connection")
    value = page.wait_for("document.querySelector('#connection-string').value")
    assert value == store.connection_string
    page.command("Browser.grantPermissions", {"origin": store.explorer_url.rstrip("/"),
                                              "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    act(page, "#copy-connection")
    assert page.text("#connection-status") == "Copied."
    assert page.evaluate("navigator.clipboard.readText()") == store.connection_string
    act(page, "#hide-connection")
    assert page.evaluate("document.querySelector('#connection-string').value") == ""


def _page_fetch(page: Browser, url: str, method: str, headers: dict[str, str], body: Any = None) -> Any:
    """fetch() from the page: the status, or the error's name when the browser refused it."""
    return page.evaluate(f"""fetch({json.dumps(url)}, {{method: {json.dumps(method)},
            headers: {json.dumps(headers)}, body: {json.dumps(json.dumps(body) if body is not None else None)}}})
        .then(r => r.status, e => e.name)""")


_REST = {"Accept": "application/json;odata=minimalmetadata", "Content-Type": "application/json",
         "x-ms-version": "2019-02-02"}


def test_a_write_from_the_page_without_the_token_is_refused(page: Browser, store: DevStore,
                                                             sdk: CloudTableClient) -> None:
    table = _name()
    status = _page_fetch(page, store.url + "/Tables", "POST", _REST, {"TableName": table})
    assert status == 403
    assert not sdk.table_exists(table)
    token = page.evaluate("document.querySelector('meta[name=tablesdk-explorer-token]').content")
    status = _page_fetch(page, store.url + "/Tables", "POST", {**_REST, "x-tablesdk-explorer-token": token + "x"},
                         {"TableName": table})
    assert status == 403
    assert not sdk.table_exists(table)


class _OtherSite(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:
        self.requests.append(self.command + " " + self.path)
        body = b"<!doctype html><title>another site</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture
def other_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherSite)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _OtherSite.requests = []
    try:
        yield f"http://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_another_origin_cannot_use_the_token_and_the_page_cannot_reach_another_origin(
        page: Browser, store: DevStore, sdk: CloudTableClient, other_site: str) -> None:
    token = page.evaluate("document.querySelector('meta[name=tablesdk-explorer-token]').content")
    # the explorer's Content-Security-Policy: nothing from the page reaches another origin
    assert _page_fetch(page, other_site + "/steal", "GET", {}) == "TypeError"
    assert _OtherSite.requests == []
    # another site's page, even one that learned the token, cannot create a table with it
    page.goto(other_site + "/")
    table = _name()
    result = _page_fetch(page, store.url + "/Tables", "POST", {**_REST, "x-tablesdk-explorer-token": token},
                         {"TableName": table})
    assert result == "TypeError"  # the emulator's CORS answer (no rule) stops the browser
    assert not sdk.table_exists(table)


@pytest.fixture(scope="module")
def read_only_store() -> Iterator[DevStore]:
    with DevStore(port=0, explorer_read_only=True) as running:
        yield running


def test_read_only_hides_and_refuses_writes(browser: Browser, read_only_store: DevStore) -> None:
    sdk = CloudStorageAccount.parse(read_only_store.connection_string).create_cloud_table_client()
    table = _name()
    sdk.create_table(table)  # a client with the key still writes
    sdk.insert_entity(table, DynamicEntity("p", "r", Value=EntityProperty(base64.b64decode("AQ=="), EdmType.BINARY)))
    browser.dialogs.clear()
    browser.goto(read_only_store.explorer_url)
    browser.wait_for("document.body.dataset.ready === 'true'")
    assert browser.visible("#mode-badge")
    _open_table(browser, table)
    rows = _wait_rows(browser, 1)
    assert rows[0]["Value"] == ["AQ==", "Edm.Binary"]
    for control in ("#create-table-form", "#insert-entity", "#delete-table", "#entities .edit-entity",
                    "#entities .delete-entity"):
        assert not browser.visible(control), control
    token = browser.evaluate("document.querySelector('meta[name=tablesdk-explorer-token]').content")
    headers = {**_REST, "x-tablesdk-explorer-token": token}
    assert _page_fetch(browser, read_only_store.url + "/Tables", "POST", headers, {"TableName": table + "b"}) == 403
    assert _page_fetch(browser, f"{read_only_store.url}/Tables('{table}')", "DELETE", headers) == 403
    assert _page_fetch(browser, read_only_store.url + "/Tables", "GET", headers) == 200
    assert sdk.table_exists(table) and not sdk.table_exists(table + "b")
    assert browser.dialogs == []


def test_even_an_anonymous_emulator_refuses_the_pages_origin_a_write_without_the_token(chromium: str,
                                                                                       browser: Browser) -> None:
    with DevStore(port=0, allow_anonymous=True) as anonymous:
        browser.goto(anonymous.explorer_url)
        browser.wait_for("document.body.dataset.ready === 'true'")
        table = _name()
        assert _page_fetch(browser, anonymous.url + "/Tables", "POST", _REST, {"TableName": table}) == 403
        assert table not in anonymous.table_names()
        # what the page does with its token still works there
        browser.type("#new-table-name", table)
        act(browser, "#create-table")
        assert anonymous.table_names() == [table]

"""Make the explorer's screenshots in docs/ (docs/devstore.md shows them): python scripts/explorer-screenshots.py

Starts the bundled emulator in-process, writes a few example tables with the SDK, and drives
headless Chromium (tests/chromium.py: the browser tests' driver) through the page:

- docs/explorer-entities.png: a table's entities with their EDM types;
- docs/explorer-edit.png: an entity open in the editor;
- docs/explorer-filter-error.png: the service's answer to a bad $filter, shown at the filter box.

Needs Chromium (apt-get install chromium, or TABLESDK_CHROMIUM=path). Rerun after changing the page.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from chromium import Browser, find_chromium  # noqa: E402

from tablesdk import CloudStorageAccount, DynamicEntity, EdmType, EntityProperty  # noqa: E402
from tablesdk.devstore import DevStore  # noqa: E402

DOCS = ROOT / "docs"


def act(page: Browser, selector: str, value: str | None = None) -> None:
    """Click (or choose ``value`` of a select) and wait until the page's action has finished."""
    before = page.evaluate("Number(document.body.dataset.done || 0)")
    if value is None:
        page.click(selector)
    else:
        page.select(selector, value)
    page.wait_for(f"Number(document.body.dataset.done) > {before} && document.body.dataset.busy === 'false'")


def seed(store: DevStore) -> None:
    client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
    for name in ("Customers", "Orders", "Readings"):
        client.create_table(name)
    start = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
    for n in range(14):
        client.insert_entity("Readings", DynamicEntity(
            f"sensor-{n % 3}", f"{n:04d}", Value=round(20 + n * 0.37, 2), Count=n * 3,
            Serial=EntityProperty(7_000_000_000 + n, EdmType.INT64), Ok=n % 4 != 0,
            Taken=start + timedelta(minutes=15 * n), Device=uuid.UUID(int=0x5EA5 + n % 3),
        ))
    client.insert_entity("Readings", DynamicEntity("sensor-9", "0000", Value=1.5, Note="<b>not bold</b>"))


def main() -> int:
    binary = find_chromium()
    if binary is None:
        print("explorer-screenshots: Chromium not found (apt-get install chromium, or TABLESDK_CHROMIUM=path)",
              file=sys.stderr)
        return 1
    with DevStore(port=0) as store, Browser(binary, width=1280, height=720) as page:
        seed(store)
        page.goto(store.explorer_url)
        page.wait_for("document.body.dataset.ready === 'true'")
        act(page, f"#table-list button[data-table={json.dumps('Readings')}]")
        act(page, "#page-size", "50")
        (DOCS / "explorer-entities.png").write_bytes(page.screenshot())

        act(page, "#entities tbody tr:nth-child(2) .edit-entity")
        (DOCS / "explorer-edit.png").write_bytes(page.screenshot())
        act(page, "#cancel-edit")

        page.type("#filter", "Count ge 5 and (Taken gt datetime'2026-03-01T08:00:00Z'")
        act(page, "#apply-filter")
        (DOCS / "explorer-filter-error.png").write_bytes(page.screenshot())
        if page.dialogs:
            print(f"explorer-screenshots: the page opened dialogs: {page.dialogs}", file=sys.stderr)
            return 1
    for name in ("explorer-entities.png", "explorer-edit.png", "explorer-filter-error.png"):
        print(f"explorer-screenshots: wrote docs/{name} ({(DOCS / name).stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

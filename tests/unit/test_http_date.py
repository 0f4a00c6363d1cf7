"""The x-ms-date text: tablesdk's own writer gives exactly email.utils.formatdate(usegmt=True)."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from tablesdk._core._auth import http_date


@pytest.mark.parametrize("timestamp", [0, 951782400, 1709164800.75, 1e9, 2**31, 253402300799])
def test_http_date_is_formatdate(timestamp: float) -> None:
    assert http_date(timestamp) == formatdate(timestamp, usegmt=True)


def test_http_date_over_many_instants() -> None:
    draw = random.Random(25)
    for _ in range(20_000):
        timestamp = draw.uniform(0, 4_102_444_800)
        assert http_date(timestamp) == formatdate(timestamp, usegmt=True)


def test_http_date_defaults_to_now() -> None:
    assert http_date()[-4:] == " GMT" and len(http_date()) == 29

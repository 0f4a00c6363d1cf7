"""The platform part of the User-Agent: worded as ``platform.platform(terse=True)``, found without a child process.

``platform.platform`` runs ``uname -p`` in a child process and scans the interpreter's
binary for the C library's version: on the first request of every process (every CLI
command) that was about 19 M instructions and a fork. On Linux with glibc the same words
come from ``os.uname()`` and ``os.confstr``.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

import pytest

from tablesdk._pipeline import _settings

linux_glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc "),
    reason="the direct path is for Linux with glibc",
)


@pytest.fixture(autouse=True)
def uncached() -> Any:
    _settings._platform.cache_clear()
    yield
    _settings._platform.cache_clear()


@linux_glibc
def test_the_words_are_platforms_own() -> None:
    processor = platform.uname().processor
    if processor not in ("", "unknown", platform.machine()):
        pytest.skip("uname -p names a processor here, which the terse words would include")
    assert _settings._platform() == platform.platform(terse=True)


CHECK_IN_A_FRESH_INTERPRETER = """
import platform, subprocess

def refused(*args, **kwargs):
    raise AssertionError("the User-Agent started a child process or scanned the interpreter")

subprocess.check_output = subprocess.Popen = platform.libc_ver = refused
from tablesdk._pipeline._settings import _platform
print(_platform())
"""


@linux_glibc
def test_no_child_process_and_no_binary_scan() -> None:
    # a fresh interpreter: platform caches what it found, so this process may already know the answer
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IN_A_FRESH_INTERPRETER], capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.strip()
    assert words.startswith(f"Linux-{os.uname().release}") and "-with-glibc" in words


def test_elsewhere_platform_words_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "confstr", lambda name: None)
    monkeypatch.setattr(platform, "platform", lambda terse=False: "Plan9-4-with-nothing" if terse else "long")
    assert _settings._platform() == "Plan9-4-with-nothing"

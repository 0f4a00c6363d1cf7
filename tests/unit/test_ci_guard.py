"""The CI guard in tests/conftest.py: under CI, a skipped or missing integration test fails the run.

Each test runs an inner pytest session (pytester, in-process) whose conftest.py is a copy of
tests/conftest.py, over a small synthetic suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST_SOURCE = (Path(__file__).resolve().parent.parent / "conftest.py").read_text(encoding="utf-8")

PASSING_AND_SKIPPED = """
import pytest

@pytest.mark.integration
def test_talks_to_service():
    assert True

@pytest.mark.integration
@pytest.mark.skip(reason="no service here")
def test_skipped_integration():
    pass

def test_unit():
    assert 1 + 1 == 2
"""

ALL_INTEGRATION_PASS = """
import pytest

pytestmark = pytest.mark.integration

def test_one():
    pass

@pytest.mark.xfail(reason="known server quirk", strict=True)
def test_xfail_counts_as_run():
    assert False
"""

UNIT_ONLY = """
def test_unit():
    assert True
"""

SKIP_INSIDE_TEST = """
import pytest

@pytest.mark.integration
def test_ok():
    pass

@pytest.mark.integration
def test_skips_at_runtime():
    pytest.skip("service unavailable")
"""

SKIP_IN_FIXTURE = """
import pytest

@pytest.fixture
def service():
    pytest.skip("could not reach the service")

@pytest.mark.integration
def test_ok():
    pass

@pytest.mark.integration
def test_uses_service(service):
    pass
"""

GUARD_ENV = ("CI", "TABLESDK_REQUIRE_INTEGRATION")


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in GUARD_ENV:
        monkeypatch.delenv(name, raising=False)
    # The outer run may have been started with TABLESDK_AZURITE_URL; the inner suite never uses it.
    monkeypatch.delenv("TABLESDK_AZURITE_URL", raising=False)
    pytester.makeconftest(CONFTEST_SOURCE)
    # The inner sessions need no asyncio support (pytest-asyncio would warn about its unset loop scope).
    pytester.makeini("[pytest]\naddopts = --strict-markers -p no:cacheprovider -p no:asyncio\n")
    return pytester


def test_skipped_integration_test_fails_the_run_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(test_suite=PASSING_AND_SKIPPED)
    result = inner.runpytest("-rs")
    result.assert_outcomes(passed=2, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*tablesdk CI guard*",
            "FAILED: integration tests are required here*1 integration test(s) skipped:*",
            "*test_suite.py::test_skipped_integration: no service here*",
        ]
    )


def test_same_run_passes_without_the_guard(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_suite=PASSING_AND_SKIPPED)
    result = inner.runpytest()
    result.assert_outcomes(passed=2, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("*tablesdk CI guard*")


@pytest.mark.parametrize("value", ["false", "0", ""])
def test_ci_false_does_not_enable_the_guard(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CI", value)
    inner.makepyfile(test_suite=PASSING_AND_SKIPPED)
    assert inner.runpytest().ret == pytest.ExitCode.OK


@pytest.mark.parametrize("how", ["TABLESDK_REQUIRE_INTEGRATION=1", "CI=1", "CI=TRUE", "--require-integration"])
def test_other_ways_to_enable_the_guard(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    args = []
    if how.startswith("--"):
        args.append(how)
    else:
        name, _, value = how.partition("=")
        monkeypatch.setenv(name, value)
    inner.makepyfile(test_suite=PASSING_AND_SKIPPED)
    result = inner.runpytest(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 integration test(s) skipped*"])


def test_all_integration_tests_ran_passes_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(test_suite=ALL_INTEGRATION_PASS)
    result = inner.runpytest()
    result.assert_outcomes(passed=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("*tablesdk CI guard*")


def test_no_integration_test_fails_under_ci(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(test_suite=UNIT_ONLY)
    result = inner.runpytest()
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no integration test was executed (0 selected)*"])


def test_deselecting_integration_tests_fails_under_ci(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(test_suite=PASSING_AND_SKIPPED)
    result = inner.runpytest("-m", "not integration")
    result.assert_outcomes(passed=1, deselected=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no integration test was executed (0 selected)*"])


def test_empty_run_stays_nonzero_under_ci(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = inner.runpytest()
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*no integration test was executed*"])


@pytest.mark.parametrize(
    "suite, skipped_id",
    [
        (SKIP_INSIDE_TEST, "test_suite.py::test_skips_at_runtime: service unavailable"),
        (SKIP_IN_FIXTURE, "test_suite.py::test_uses_service: could not reach the service"),
    ],
    ids=["skip-in-test-body", "skip-in-fixture"],
)
def test_runtime_skips_are_caught(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, suite: str, skipped_id: str
) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(test_suite=suite)
    result = inner.runpytest()
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{skipped_id}*"])


def test_failures_keep_their_exit_status(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    inner.makepyfile(
        test_suite="""
import pytest

@pytest.mark.integration
def test_fails():
    assert False
"""
    )
    result = inner.runpytest()
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.no_fnmatch_line("*tablesdk CI guard*")  # it executed: nothing to add


def test_integration_marker_is_registered(inner: pytest.Pytester) -> None:
    # --strict-markers is on in the inner ini: an unregistered marker would be an error.
    inner.makepyfile(test_suite=ALL_INTEGRATION_PASS)
    assert inner.runpytest().ret == pytest.ExitCode.OK

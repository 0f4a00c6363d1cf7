"""The documentation runner: markers, the per-document namespace and the mypy modules."""

from __future__ import annotations

from pathlib import Path
from unittest import SkipTest

import pytest
from sybil import Document
from sybil.example import NotEvaluated

from tests.doc_examples import REAL_ACCOUNT_REASON, module_text, parsers, python_blocks

PAGE = """\
# A page

```python
x = 1
```

<!-- real-account: next -->

```python
raise RuntimeError("would need a real account")
```

<!-- invisible-code-block: python
y = x + 1
-->

```python
assert y == 2
```
"""


def evaluate_all(path: Path) -> list[str]:
    """Evaluate every example of a document in order; 'ran', 'skipped: reason' or 'not evaluated'."""
    document = Document.parse(str(path), *parsers())
    outcomes = []
    for example in document:
        try:
            example.evaluate()
        except SkipTest as skip:
            outcomes.append(f"skipped: {skip}")
        except NotEvaluated:
            outcomes.append("not evaluated")
        else:
            outcomes.append("ran")
    return outcomes


def test_real_account_blocks_are_skipped_with_the_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    outcomes = evaluate_all(page)
    # the marker itself, then: x = 1, the skipped block, the hidden block, the assert
    assert f"skipped: {REAL_ACCOUNT_REASON}" in outcomes
    assert outcomes.count("ran") >= 3


def test_an_unmarked_failing_block_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("<!-- real-account: next -->\n", ""), encoding="utf-8")
    with pytest.raises(RuntimeError, match="real account"):
        evaluate_all(page)


def test_mypy_module_keeps_the_documents_line_numbers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    blocks = python_blocks(page)
    assert [source.strip() for _, source in blocks] == [
        "x = 1", 'raise RuntimeError("would need a real account")', "y = x + 1", "assert y == 2"]
    text = module_text(page).split("\n")
    doc = PAGE.split("\n")
    for first, source in blocks:
        assert text[first - 1] == doc[first - 1] == source.split("\n")[0]

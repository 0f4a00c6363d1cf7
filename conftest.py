"""Collects the Python blocks of README.md and docs/*.md as tests (see tests/doc_examples.py)."""

from tests.doc_examples import make_sybil

pytest_collect_file = make_sybil().pytest()

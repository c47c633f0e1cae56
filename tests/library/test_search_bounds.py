"""`vlmocr search` bounds the query before SQLite sees it: thousands of OR'd prefix terms used to
keep FTS5 busy for minutes. Too long, too many terms or too many prefixes: one line, exit 3."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.cli import run_cli, textlayer_run
from support.documents import make_doc
from vlmocr.library.catalog import MAX_PREFIX_TERMS, MAX_QUERY_CHARS, MAX_QUERY_TERMS


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bounds")
    make_doc(root / "src", "a.pdf", 1, 2)
    textlayer_run(root / "run", root / "src")
    assert run_cli("publish", str(root / "run"), "--library", str(root / "lib")).returncode == 0
    return root / "lib"


def one_line_usage_error(proc, expected: str) -> None:
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and expected in lines[0], proc.stderr


def test_three_thousand_ored_prefix_terms_are_refused_at_once(lib):
    query = " OR ".join(f"{a}{b}*" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz")
    query = " OR ".join([query] * 5)  # 3 380 prefix terms
    t0 = time.monotonic()
    proc = run_cli("search", str(lib), query, timeout=60)
    one_line_usage_error(proc, f"at most {MAX_QUERY_CHARS}")
    assert time.monotonic() - t0 < 30


def test_the_bounds_on_terms_and_prefixes(lib):
    many = " ".join(["river"] * (MAX_QUERY_TERMS + 1))
    one_line_usage_error(run_cli("search", str(lib), many), f"{MAX_QUERY_TERMS + 1} terms")
    prefixes = " OR ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxyz"[:MAX_PREFIX_TERMS + 1])
    one_line_usage_error(run_cli("search", str(lib), prefixes), f"{MAX_PREFIX_TERMS + 1} prefix terms")
    one_line_usage_error(run_cli("search", str(lib), "river", "--limit", "0"), "--limit 0")
    # Within the bounds: answered (operators are not terms).
    fine = " OR ".join(f"{c}*" for c in "abcdefghijklmnopqrstuvwxyz"[:MAX_PREFIX_TERMS])
    proc = run_cli("search", str(lib), fine + " AND Doc1")
    assert proc.returncode == 0 and "a\tp.1" in proc.stdout, proc.stderr

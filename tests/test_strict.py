"""Strict mode has no hole: every test that meets a missing component goes through one helper,
support.components.need, which skips on a developer's machine and fails under VLMOCR_TEST_STRICT=1
(CI). A test that skipped some other way — pytest.skip, importorskip, a skip mark — would pass as
"skipped" in CI with the component gone; this test finds any."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HELPER = TESTS / "support" / "components.py"


def _skips(tree: ast.AST) -> list[int]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("skip", "importorskip", "skipif", "xfail") \
                and isinstance(node.value, (ast.Name, ast.Attribute)):
            base = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if base in ("pytest", "mark"):
                out.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest" \
                and any(a.name in ("skip", "importorskip") for a in node.names):
            out.append(node.lineno)
    return sorted(set(out))


def test_no_test_skips_but_through_need():
    found = [f"{path.relative_to(TESTS)}:{line}" for path in sorted(TESTS.rglob("*.py")) if path != HELPER
             for line in _skips(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "skip through support.components.need (strict mode fails it): " + ", ".join(found)


def test_the_scan_finds_each_way_of_skipping():
    code = ('import pytest\nfrom pytest import importorskip\n@pytest.mark.skipif(True, reason="x")\n'
            'def test_a():\n    pytest.skip("x")\n    yaml = pytest.importorskip("yaml")\n')
    assert _skips(ast.parse(code)) == [2, 3, 5, 6]

"""Issue 26, point 1: one list of system packages (scripts/system-packages.txt) that scripts/test.sh
installs from and every strict-mode check names its packages from. CI once stayed green only
because the machine still had tesseract-ocr-script-frak after it fell out of test.sh's own list."""

from __future__ import annotations

import ast
import subprocess

import pytest

from support.components import REPO, need, system_packages
from vlmocr.languages import debian_package


def named_packages() -> dict[str, list[str]]:
    """Every package a `need(…, packages)` call in the tests names literally (f-strings aside: their
    names come from debian_package, checked below), with where."""
    found: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("*.py"):
        if path.name == "test_system_packages.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "need"):
                continue
            args = node.args[2:] + [k.value for k in node.keywords if k.arg == "packages"]
            literals = [a for arg in args for a in ([arg] if not isinstance(arg, (ast.Tuple, ast.List)) else arg.elts)]
            for lit in literals:
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str):
                    found.setdefault(lit.value, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_every_package_a_check_names_is_in_the_one_list():
    named = named_packages()
    assert {"tesseract-ocr-script-frak", "tesseract-ocr-slk", "tesseract-ocr-osd", "chromium"} <= set(named)
    unlisted = {p: where for p, where in named.items() if p not in system_packages()}
    assert not unlisted, unlisted


def test_the_language_data_the_tests_read_is_listed():
    # need_tesseract(lang) names debian_package(lang): every language a test asks for must be listed.
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("*.py"))
    import re

    langs = set()
    for call in re.findall(r"need_tesseract\(([^)]*)\)", source):
        langs |= set(re.findall(r'"([a-z_/A-Za-z]+)"', call))
    assert {"grc", "deu", "eng"} <= langs
    missing = {lang: debian_package(lang) for lang in langs if debian_package(lang) not in system_packages()}
    assert not missing, missing


def test_a_check_naming_an_unlisted_package_fails_even_when_the_component_is_there():
    with pytest.raises(pytest.fail.Exception, match="not in system-packages.txt"):
        need(True, "something", "tesseract-ocr-xyz")
    need(True, "the engine", "tesseract-ocr")  # listed: nothing happens


def test_test_sh_installs_from_the_list_and_slurm_up_its_own_part():
    text = (REPO / "scripts" / "test.sh").read_text()
    assert "scripts/system-packages.txt" in text and "tesseract-ocr-" not in text
    assert "system-packages.txt" in (REPO / "scripts" / "slurm-up.sh").read_text()
    # test.sh's own reading of the list gives every untagged package
    (reading,) = [line.split("< <(", 1)[1].rsplit(")", 1)[0] for line in text.splitlines()
                  if line.strip().startswith("mapfile -t apt_pkgs")]
    out = subprocess.run(["bash", "-c", reading], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert out == [p for p, tag in system_packages().items() if not tag]
    assert [p for p, tag in system_packages().items() if tag == "[slurm]"] == ["slurm-wlm", "munge"]

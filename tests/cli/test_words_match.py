"""Issue 26, point 2: words that match the program. `run --help` said `auto` means "Tesseract when
installed with --lang's data, else RapidOCR" while the program picks RapidOCR for Latin script;
`--manifest`'s help left out `language`. The rule is stated once (engines/choice.AUTO_RULE) and
the help is made from it; the README's samples figure is recomputed in tests/reading/test_run.py."""

from __future__ import annotations

import re

from support.cli import run_cli
from support.components import REPO
from vlmocr.engines.choice import AUTO_RULE, best_for


def flat(text: str) -> str:
    return re.sub(r"[\s│|]+", " ", text)


def test_run_help_states_the_rule_the_program_follows():
    res = run_cli("run", "--help", env={"COLUMNS": "200"})
    assert res.returncode == 0
    assert flat(AUTO_RULE) in flat(res.stdout)
    assert "Tesseract when installed with --lang's data, else RapidOCR" not in flat(res.stdout)
    # the rule is the program's: Latin and Fraktur to RapidOCR, Greek and Cyrillic to Tesseract
    data = frozenset({"eng", "frk", "grc", "rus"})
    assert best_for("eng", data).engine == best_for("frk", data).engine == "rapidocr"
    assert best_for("grc", data).engine == best_for("rus", data).engine == "tesseract"


def test_every_manifest_option_names_the_language_column():
    for command in (("run",), ("triage",), ("dedup",), ("slurm", "submit")):
        res = run_cli(*command, "--help", env={"COLUMNS": "200"})
        assert "doc_id,path[,pages,dpi,language]" in flat(res.stdout), command


def test_the_user_guide_says_the_same_rule():
    text = flat((REPO / "docs" / "user-guide.md").read_text(encoding="utf-8"))
    assert "RapidOCR for Latin-script languages, Fraktur included" in text
    assert "for a script RapidOCR's shipped models cannot read" in text


def test_version_and_the_commands_in_the_order_of_the_work():
    """Issue 26, point 4: `vlmocr --version`, and `vlmocr --help` in workflow order."""
    from vlmocr import __version__

    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith(f"vlmocr {__version__}")
    listed = [line.split()[0] for line in run_cli("--help", env={"COLUMNS": "200"}).stdout.split("Commands:")[1]
              .splitlines() if line.startswith("  ") and not line.startswith("   ")]
    order = ["triage", "manifest", "plan", "run", "evaluate", "report", "clean", "publish", "search", "export",
             "slurm", "serve"]
    assert [c for c in listed if c in order] == order, listed

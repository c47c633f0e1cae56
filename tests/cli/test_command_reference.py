"""Issue 26, point 6: the command reference in docs/ is the commands' own --help, kept current."""

from __future__ import annotations

from support.components import REPO
from vlmocr.cli.reference import command_reference


def test_docs_commands_md_is_what_the_commands_print():
    made = command_reference()
    assert "## vlmocr run\n" in made and "## vlmocr slurm submit\n" in made and "--engine" in made
    assert (REPO / "docs" / "commands.md").read_text(encoding="utf-8") == made, \
        "docs/commands.md is stale: python scripts/make_command_reference.py"

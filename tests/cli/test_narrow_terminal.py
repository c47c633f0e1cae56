"""At 80 columns, in a terminal or a pipe, nothing the user must read or type is cut: every
profile name and model in `vlmocr profiles list`, every command, option and help text of every
`--help` (rich's tables cut them: `deepseek-…`, `auto|textlayer|rap…`)."""

from __future__ import annotations

import json
import re

import pytest
import typer

from support.cli import cli_in_process, run_cli
from vlmocr.cli import _register, app

WIDTH = 80


def squeezed(text: str) -> str:
    """`text` without whitespace: a wrapped line is still whole, a cut one is not."""
    return re.sub(r"\s+", "", text)


def fits(output: str) -> None:
    too_wide = [line for line in output.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    assert not re.search(r"\w…(?=[\s│┃]|$)", output, re.MULTILINE), output  # rich's cut: `deepseek-…`, `rap…`


def test_profiles_list_shows_every_name_and_model_whole_in_a_pipe():
    listed = json.loads(run_cli("profiles", "list", "--json").stdout)
    proc = run_cli("profiles", "list", env={"COLUMNS": str(WIDTH)})  # stdout is a pipe here
    assert proc.returncode == 0, proc.stderr
    fits(proc.stdout)
    first_words = [line.split()[0] for line in proc.stdout.splitlines() if line[:1].strip()]
    for p in listed:
        assert p["name"] in first_words  # on a line of its own start, as it is typed
        assert not p["model"] or p["model"] in proc.stdout
    descriptions = squeezed(proc.stdout)
    from vlmocr.profiles import list_profiles

    assert all(squeezed(p.description) in descriptions for p in list_profiles())


def command_paths() -> list[tuple[str, ...]]:
    _register()  # every command module
    paths: list[tuple[str, ...]] = [()]

    def walk(group, prefix: tuple[str, ...]) -> None:
        for name, cmd in sorted(group.commands.items()):
            paths.append((*prefix, name))
            if hasattr(cmd, "commands"):
                walk(cmd, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "vlmocr")
def test_every_help_is_whole_at_80_columns(monkeypatch, path):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    proc = cli_in_process(*path, "--help")
    assert proc.returncode == 0, proc.stderr
    fits(proc.stdout)
    shown = squeezed(proc.stdout)
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    for sub in getattr(command, "commands", {}).values():  # a group: each command's whole summary
        assert squeezed(sub.get_short_help_str(limit=1_000)) in shown, sub.name
    for param in command.params:
        if getattr(param, "param_type_name", "") == "argument" and param.metavar:  # shown as {REPO|PROFILE}
            assert param.metavar in proc.stdout, param.name
            continue
        for opt in param.opts:
            assert opt in proc.stdout, opt
        if getattr(param, "help", None):
            assert squeezed(param.help) in shown, (param.name, param.help)

"""The command reference (docs/commands.md), made from the commands' own help so it never says
anything the program does not: `python scripts/make_command_reference.py` writes it, and a test
fails when it differs from what the commands print."""

from __future__ import annotations

from typing import Any, Iterator

import typer

from . import _register, app

WIDTH = 100  # columns of the help text in the reference


def _walk(command: Any, ctx: typer.Context, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """The help of `command`'s subcommands (a click group), depth first."""
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        sub_ctx = typer.Context(sub, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH)
        yield " ".join(path + (name,)), sub.get_help(sub_ctx)
        if hasattr(sub, "list_commands"):
            yield from _walk(sub, sub_ctx, path + (name,))


def command_reference() -> str:
    """Markdown: every command's `--help`, in the order `vlmocr --help` lists them."""
    _register(None)
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="vlmocr", terminal_width=WIDTH, max_content_width=WIDTH)
    out = ["# Command reference", "",
           "Every command's `--help`, as the program prints it (made by "
           "`python scripts/make_command_reference.py`; a test keeps it current).", ""]
    sections = [("vlmocr", root.get_help(ctx)), *_walk(root, ctx, ("vlmocr",))]
    out += [f"- [`{name}`](#{name.replace(' ', '-')})" for name, _ in sections[1:]]
    out.append("")
    for name, text in sections:
        out += [f"## {name}", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)

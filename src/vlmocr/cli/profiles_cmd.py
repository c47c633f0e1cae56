"""`vlmocr profiles list | show P`."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from ..profiles import list_profiles, load_profile
from ..progress import console
from . import app

profiles_app = typer.Typer(help="Model profiles (data files: prompt, sizing, sampling, server flags).", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")


@profiles_app.command("list")
def list_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable list on stdout.")) -> None:
    """Every profile: shipped ones and those on VLMOCR_PROFILE_PATH."""
    profiles = list_profiles()
    if json_out:
        print(json.dumps([{"name": p.name, "model": p.model, "prompt_id": p.prompt_id if not p.image_only else None,
                           "source": str(p.source)} for p in profiles]))
        return
    table = Table("profile", "model", "image", "max_tokens", "concurrency", "description")
    for p in profiles:
        size = f"{p.image.longest_side} px" if p.image.longest_side else f"{p.image.dpi} dpi"
        table.add_row(p.name, p.model or "-", f"{size} {p.image.format}", str(p.max_tokens), str(p.concurrency),
                      p.description)
    from rich.console import Console

    Console(soft_wrap=False).print(table)


@profiles_app.command("show")
def show_command(name: str = typer.Argument(..., help="Profile name or path to a .toml file.")) -> None:
    """The whole profile as JSON (after defaults), and the file it came from."""
    p = load_profile(name)
    data = p.model_dump(mode="json")
    data["prompt_id"] = p.prompt_id if not p.image_only else None
    data["source"] = str(p.source)
    print(json.dumps(data, indent=2, ensure_ascii=False))

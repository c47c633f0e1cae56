"""`vlmocr profiles list | show P`."""

from __future__ import annotations

import json

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ..profiles import list_profiles, load_profile
from . import app, plain_typer

profiles_app = plain_typer(help="Model profiles (data files: prompt, sizing, sampling, server flags).")
app.add_typer(profiles_app, name="profiles")


@profiles_app.command("list")
def list_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable list on stdout.")) -> None:
    """Every profile: shipped ones and those on VLMOCR_PROFILE_PATH."""
    profiles = list_profiles()
    if json_out:
        print(json.dumps([{"name": p.name, "model": p.model, "prompt_id": p.prompt_id if not p.image_only else None,
                           "source": str(p.source)} for p in profiles]))
        return
    # Two columns, so that nothing is cut at 80 columns or in a pipe: the name, which is typed
    # (never wrapped), and beside it the model, the sizes and the description, wrapped whole.
    table = Table("profile", "model · image · limits · description", box=box.SIMPLE_HEAD, show_edge=False,
                  leading=1, pad_edge=False)
    table.columns[0].no_wrap = True
    table.columns[1].overflow = "fold"  # a repo id longer than the line still shows every character
    for p in profiles:
        size = f"{p.image.longest_side} px" if p.image.longest_side else f"{p.image.dpi} dpi"
        details = Text(p.model or "(any model: --model)", style="bold")
        details.append(f"\n{size} {p.image.format}, max_tokens {p.max_tokens}, concurrency {p.concurrency}")
        if p.memory is not None:
            details.append(f"\nGPU memory: {p.memory.min_gpu_gb:g} GB ({p.memory.weights_gb:g} GB weights"
                           + (f", {p.memory.dtype}" if p.memory.dtype else "") + ")")
        if p.description:
            details.append(f"\n{p.description}", style="dim")
        table.add_row(Text(p.name, style="bold cyan"), details)
    from rich.console import Console

    Console().print(table)


@profiles_app.command("show")
def show_command(name: str = typer.Argument(..., help="Profile name or path to a .toml file.")) -> None:
    """The whole profile as JSON (after defaults), and the file it came from; `memory` is the GPU
    memory it needs (`vlmocr plan --partitions`)."""
    p = load_profile(name)
    data = p.model_dump(mode="json")
    data["prompt_id"] = p.prompt_id if not p.image_only else None
    data["source"] = str(p.source)
    print(json.dumps(data, indent=2, ensure_ascii=False))

"""Can an output path be written? Asked before any work starts, so a typo in `--out` costs one
line and exit 3 (`UsageError`), not a traceback after the first hour of reading.

The check needs no side effect: nothing is created here. It catches what a user gets wrong
(an existing file where a folder is wanted and the reverse, a parent that is a file, a folder
they may not write); a refusal it cannot foresee (root on a read-only mount) still ends in one
line, through the command line's last resort for OSError (cli.main)."""

from __future__ import annotations

import os
from pathlib import Path

from .exceptions import UsageError


def _nearest_existing(path: Path) -> Path:
    """`path` or the closest of its parents that exists (as anything, even a dangling link)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(path.anchor or ".")


def check_output_path(path: str | os.PathLike[str], option: str = "--out", *, folder: bool) -> None:
    """Refuse (exit 3) an output `path` that cannot be created or written: a folder when
    `folder`, else a file (written under a temporary sibling and renamed over it)."""
    given = Path(path)
    target = Path(os.path.abspath(given))
    if os.path.lexists(target):
        if folder and not target.is_dir():
            raise UsageError(f"{option} {given} exists and is not a folder; give a new or empty folder")
        if not folder and target.is_dir():
            raise UsageError(f"{option} {given} is a folder; give a file name")
        where = target if folder else target.parent
        if not os.access(where, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {given}: the folder {where} is not writable")
        return
    parent = _nearest_existing(target.parent)
    if not parent.is_dir():
        raise UsageError(f"{option} {given}: cannot create it, {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {given}: cannot create it, the folder {parent} is not writable")


# What marks a folder that only its own command writes: a run (its raw layer and settings) and a
# library (its catalogue). Another command writing there could replace RUN/pages.jsonl itself.
RUN_MARKERS = ("pages.jsonl", "run.json")
LIBRARY_MARKERS = ("catalog.sqlite",)


def owning_folder(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """The run or library folder ``path`` lies in (itself or a parent), and which it is."""
    target = Path(os.path.abspath(path))
    for folder in (target, *target.parents):
        if any((folder / m).is_file() for m in RUN_MARKERS):
            return folder, "run"
        if any((folder / m).is_file() for m in LIBRARY_MARKERS):
            return folder, "library"
    return None


def check_new_output(path: str | os.PathLike[str], option: str, *, folder: bool = False,
                     overwrite: bool = False) -> None:
    """The one rule of every command that writes a file or a folder of its own (issue 32): a file
    that exists is refused unless ``overwrite``; nothing is written inside a run or a library
    folder, whatever is asked (only the run, and publish, write there); then `check_output_path`."""
    owner = owning_folder(Path(path) if folder else Path(path).parent)
    if owner is not None:
        where, kind = owner
        raise UsageError(f"{option} {path}: {where} is a {kind} folder, which only "
                         f"{'the run' if kind == 'run' else 'publish'} writes; write elsewhere")
    if not folder and os.path.lexists(path) and not os.path.isdir(path) and not overwrite:
        raise UsageError(f"{option} {path} exists; give a new name, or --overwrite to replace it")
    check_output_path(path, option, folder=folder)

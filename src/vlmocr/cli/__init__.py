"""The `vlmocr` command: thin typer commands over library functions.

Exit codes come from `ExitCode` only. click's usage errors (exit 2 by default) are mapped to
`ExitCode.usage`, because 2 means "only review pages remain" to scripts driving a run."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any

import typer

try:  # typer ≥ 0.20 vendors click; older releases use the click package
    from typer._click import core as click_core  # type: ignore[import-not-found]
    from typer._click import exceptions as click_exceptions  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import click.core as click_core  # type: ignore[no-redef]
    import click.exceptions as click_exceptions  # type: ignore[no-redef]
from rich.markup import escape
from typer.core import TyperGroup

from ..engines.plugins import check_plugins
from ..envvars import check_environment
from ..exceptions import ExitCode, UsageError, VlmocrError
from ..progress import console

# `vlmocr --help` lists the commands in the order of the work: look at the corpus, read
# it, measure it, clean and keep it; then the cluster, the servers and the models.
WORKFLOW = ("triage", "manifest", "plan", "run", "evaluate", "suspicious", "compare", "report", "clean",
            "grid", "dedup", "publish", "search", "export", "identify", "describe", "merge", "slurm", "serve",
            "profiles", "models")


class HelpGroup(TyperGroup):
    """Command lists with each command's whole summary, wrapped at the terminal's width: click
    cuts it to one line (`Crop the figures that grounded models found and describe...`); the
    top-level list in the order of the work (WORKFLOW), others as registered."""

    def list_commands(self, ctx: click_core.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        if ctx.parent is not None:
            return names
        return sorted(names, key=lambda n: (WORKFLOW.index(n) if n in WORKFLOW else len(WORKFLOW), n))

    def format_commands(self, ctx: click_core.Context, formatter: click_core.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=1_000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


# Help is click's plain text: rich's option table cuts every long word at 80 columns (`rap…`,
# `http://127.0.0.1:8…`) and squeezes the help text to a few words a line; plain lines wrap
# whole words at any width, in a terminal and in a pipe. Command groups are made the same way.
def plain_typer(**kwargs: Any) -> typer.Typer:
    """A typer app (the root or a command group) whose help is plain text (above)."""
    return typer.Typer(cls=HelpGroup, rich_markup_mode=None, context_settings={"max_content_width": 120},
                       no_args_is_help=True, **kwargs)


app = plain_typer(
    name="vlmocr",
    help="Turn documents into verified text with VLMs or embedded OCR, page by page.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__
        from ..runfolder.rundir import git_commit

        commit = git_commit()
        print(f"vlmocr {__version__}" + (f" (commit {commit[:12]})" if commit else ""), flush=True)
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print vlmocr's version (and the commit it was built from) and exit.")) -> None:
    """Turn documents into verified text with VLMs or embedded OCR, page by page."""


# Which module defines each command. Only the invoked command's module is imported: the
# others pull in SQLite, SLURM, report and pydantic-heavy modules that would add a second to
# every start (a 10-page run pays it in full).
COMMAND_MODULES = {
    "run": "run_cmd", "profiles": "profiles_cmd", "serve": "serve_cmd", "models": "models_cmd",
    "slurm": "slurm_cmd", "merge": "slurm_cmd",
    "evaluate": "quality_cmd", "compare": "quality_cmd", "clean": "quality_cmd",
    "suspicious": "quality_cmd", "grid": "quality_cmd",
    "triage": "triage_cmd", "plan": "triage_cmd", "manifest": "triage_cmd",
    "report": "report_cmd", "describe": "describe_cmd",
    "dedup": "library_cmd", "publish": "library_cmd", "search": "library_cmd",
    "export": "library_cmd", "identify": "library_cmd",
}


def _register(argv: list[str] | None = None) -> None:
    """Import command modules (they register themselves on `app`): the one `argv` names, or
    all of them for help and unknown commands."""
    import importlib

    first = next((a for a in argv or [] if not a.startswith("-")), None)
    wanted = [COMMAND_MODULES[first]] if first in COMMAND_MODULES else sorted(set(COMMAND_MODULES.values()))
    for module in dict.fromkeys(wanted):
        importlib.import_module(f"{__name__}.{module}")


def say_reading(run_dir: Path) -> None:
    """On stderr: which reading of a run folder a command reads (a folder holds one,
    named by its settings key), e.g. `runs/a: reading 29e8530485f0 (engine auto, reader rapidocr)`."""
    from ..runfolder.rundir import RunDir

    console.print(f"{run_dir}: {RunDir(run_dir).run_info().reading()}", markup=False, highlight=False)


def path_error(exc: OSError) -> str:
    """One line for a path the commands' own checks (vlmocr.files) could not foresee: root on
    a read-only mount, a folder that changed since, a full disk. Never a traceback."""
    where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    return f"{where}: {exc.strerror or exc}"


def check_working_folder() -> None:
    """The folder the shell is in must still exist: relative paths, the run's provenance and the
    search for a run's sources start from it, and a folder deleted under the shell made `run` end
    in "internal error while planning: FileNotFoundError" (exit 7)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UsageError("the current folder no longer exists (deleted after this shell entered it): "
                         "cd to a folder that exists and run the command again") from None


def _internal_error() -> ExitCode:
    """The exception being handled is a bug: its traceback on stderr, one line saying so, exit 7."""
    import traceback

    traceback.print_exc(file=sys.stderr)
    console.print("[red]internal error:[/red] a bug in vlmocr: please report it with the traceback above (exit 7)")
    return ExitCode.internal


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args[:1] == ["run"]:
        # A stop asked for during start-up is kept, not fatal (stopsignal.py); `python -m
        # vlmocr` has done this already, before importing the CLI.
        from ..stopsignal import listen_early

        listen_early()
    _register(args)
    command = typer.main.get_command(app)
    code: int  # an ExitCode, or what a command returned
    try:
        check_working_folder()
        check_environment()  # a broken VLMOCR_* value: one line naming it, before any work
        check_plugins()  # VLMOCR_PLUGINS names modules that import
        rv = command.main(args=args, prog_name="vlmocr", standalone_mode=False)
    except click_exceptions.ClickException as exc:  # a usage error, a file click could not open
        exc.show(file=sys.stderr)
        code = ExitCode.usage
    except typer.Abort:
        console.print("[red]aborted")
        code = ExitCode.interrupted
    except typer.Exit as exc:
        code = exc.exit_code
    except VlmocrError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        code = exc.exit_code
    except KeyboardInterrupt:
        code = ExitCode.interrupted
    except OSError as exc:
        if exc.filename is None:
            code = _internal_error()  # no path a user could fix: a bug, with its traceback
        else:
            console.print(f"[red]error:[/red] {escape(path_error(exc))}")
            code = ExitCode.storage if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ExitCode.usage
    except Exception:  # a bug: said so with its traceback, exit 7 — never 1, which tells a scheduler "resubmit"
        code = _internal_error()
    else:
        code = rv if isinstance(rv, int) else ExitCode.ok
    finally:
        if args[:1] == ["run"]:
            from ..stopsignal import stop_listening

            stop_listening()
    sys.exit(int(code))

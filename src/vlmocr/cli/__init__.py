"""The `vlmocr` command: thin typer commands over library functions.

Exit codes come from `ExitCode` only. click's usage errors (exit 2 by default) are mapped to
`ExitCode.usage`, because 2 means "only review pages remain" to scripts driving a run."""

from __future__ import annotations

import sys

import typer

try:  # typer ≥ 0.20 vendors click; older releases use the click package
    from typer._click import exceptions as click_exceptions  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import click.exceptions as click_exceptions

from ..exceptions import ExitCode, VlmocrError
from rich.markup import escape

from ..progress import console

app = typer.Typer(
    name="vlmocr",
    help="Turn documents into verified text with VLMs or embedded OCR, page by page.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Turn documents into verified text with VLMs or embedded OCR, page by page."""


def _register() -> None:
    from . import run_cmd  # noqa: F401  (commands register themselves on `app`)
    from . import profiles_cmd  # noqa: F401
    from . import triage_cmd  # noqa: F401
    from . import report_cmd  # noqa: F401
    from . import slurm_cmd  # noqa: F401
    from . import quality_cmd  # noqa: F401
    from . import serve_cmd  # noqa: F401
    from . import library_cmd  # noqa: F401
    from . import describe_cmd  # noqa: F401
    from . import models_cmd  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    _register()
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv if argv is not None else sys.argv[1:], prog_name="vlmocr", standalone_mode=False)
    except click_exceptions.UsageError as exc:
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
    else:
        code = rv if isinstance(rv, int) else ExitCode.ok
    sys.exit(int(code))

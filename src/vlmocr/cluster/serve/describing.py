"""`vlmocr describe RUN|--library LIB --serve PROFILE`: the describing model's own server on this
node, started exactly as `vlmocr run --serve` starts it (``running.serve_for_run``: the same
``VLMOCR_SERVE_MODEL_PATH``, ``VLMOCR_SERVE_REVISION``, ``VLMOCR_SERVE_ARGS``,
``VLMOCR_SERVE_HEALTH_TIMEOUT``, ``VLMOCR_SERVE_NO_P2P``; the log in ``<dir>/logs/server-*.log``),
described against (its URL and served model name), and stopped whatever happens (an error,
Ctrl-C, SIGTERM).

Whether anything is owed is decided first, offline: the served model's name is known before
the server starts (``--model``, else the profile's repo id, as ``plan.choose_model`` names it),
so the describe key is too. With nothing owed, or for a dry run, no server is started: a GPU job
resubmitted after it finished loads no model."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ...exceptions import UsageError
from ...reading.describe import DescribeSummary, describe_run, settled_summary
from ...settings.figures import DescribeOptions

NOTHING_OWED = "nothing owed: every figure has a final description under these settings (no server started)"


def served_options(opts: DescribeOptions, serve: str, environ: Mapping[str, str] | None = None) -> DescribeOptions:
    """``opts`` as the describe against the server will have them, known before it starts: the
    profile (``--profile``, else the served one), the served model name and the server kind
    (``--server-kind`` when vllm or sglang, else vLLM, as for `run --serve`). Usage errors (an
    ``--endpoint`` too, an unknown profile, a bad value) are raised here, before any start."""
    from .plan import SERVERS, choose_model
    from .running import ENV_SERVE_MODEL_PATH

    if opts.endpoint:
        raise UsageError("give --serve PROFILE or --endpoint URL, not both")
    opts.check(served=True)
    if opts.profile:
        from ...profiles import load_profile

        load_profile(opts.profile)  # an unknown profile is a usage error now, not after the model loaded
    env = os.environ if environ is None else environ
    kind = opts.server_kind if opts.server_kind in SERVERS else "vllm"
    _, _, _, name = choose_model(serve, kind, env.get(ENV_SERVE_MODEL_PATH) or None, None, opts.model,
                                 hint=f"DIR_OR_REPO (or {ENV_SERVE_MODEL_PATH})")
    return opts.model_copy(update={"profile": opts.profile or serve, "model": name, "server_kind": kind})


@contextlib.contextmanager
def describe_server(opts: DescribeOptions, serve: str, log_root: Path,
                    environ: Mapping[str, str] | None = None) -> Iterator[DescribeOptions]:
    """Start the server for ``serve`` (its log under ``log_root/logs``) as `run --serve` starts it,
    yield ``opts`` pointed at it (DescribeOptions.served_by), stop it on the way out."""
    from .running import start_server

    with start_server(serve, opts.server_kind, opts.model, Path(log_root), environ) as endpoint:
        yield opts.served_by(endpoint)


def describe_run_served(run_dir: str | Path, opts: DescribeOptions, serve: str, *,
                        progress: Callable[[str], None] | None = None, handle_signals: bool = False,
                        environ: Mapping[str, str] | None = None) -> DescribeSummary:
    """`vlmocr describe RUN --serve PROFILE`."""
    note = progress or (lambda _msg: None)
    opts = served_options(opts, serve, environ)
    if opts.dry_run:
        return describe_run(run_dir, opts, progress=progress, handle_signals=handle_signals)
    summary = settled_summary(run_dir, opts)
    if not summary.owed:
        note(NOTHING_OWED)
        return summary
    with describe_server(opts, serve, Path(run_dir), environ) as served:
        return describe_run(run_dir, served, progress=progress, handle_signals=handle_signals)

"""What served a run's pages: the server's name and version, the model's revision and where that
revision came from, and, when vlmocr started the server, the GPUs it runs on and how long it took
to come up. run.json keeps it whole (``server``); every VLM page record keeps the two words a
reader of one page needs (``revision``, and ``server``: "vllm 0.11.0"). Asked once per run.

Where the revision comes from (``revision_source``), most trusted first:

* ``manifest``: the model directory the server serves (``/v1/models``' ``root``: vLLM and SGLang
  name the model path they were started with) holds the manifest `vlmocr models fetch` wrote,
  whose commit was checked when vlmocr started the server;
* ``/v1/models``: that ``root`` is a Hugging Face cache snapshot (``…/snapshots/<commit>``);
* ``VLMOCR_SERVE_REVISION``: declared in the environment (``run --serve`` passes it to the
  server as ``--revision``);
* ``profile``: the profile's pinned revision, which nothing checked against the server.

What the server says beats what was declared: a declared revision that differs from it is
reported (``revision_declared``) and warned about once, not taken."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from ..exceptions import VlmocrError
from ..settings.models import MANIFEST_NAME, read_manifest

SERVE_REVISION_ENV = "VLMOCR_SERVE_REVISION"
_SNAPSHOT = re.compile(r"(?:^|/)snapshots/([0-9a-f]{40})(?:/|$)")
# Where each server kind says its version: vLLM GET /version → {"version": …}; SGLang GET
# /get_server_info → its server arguments with "version". Any other endpoint: both are tried.
VERSION_PATHS: dict[str, tuple[str, ...]] = {
    "vllm": ("/version",),
    "sglang": ("/get_server_info",),
    "openai": ("/version", "/get_server_info"),
}


def observed_revision(root: str | None) -> tuple[str, str] | None:
    """(commit, source) the served model path itself tells, or None."""
    if not root:
        return None
    path = Path(root)
    try:
        pinned = path.is_dir() and (path / MANIFEST_NAME).is_file()
    except OSError:
        pinned = False
    if pinned:
        # A manifest that cannot be read tells nothing (models status names what is wrong).
        with contextlib.suppress(VlmocrError, OSError, ValueError, KeyError, TypeError):
            return read_manifest(path).commit, "manifest"
    match = _SNAPSHOT.search(root.replace(os.sep, "/"))
    return (match.group(1), "/v1/models") if match else None


class Declared(TypedDict):
    revision: str
    source: str


class Revision(TypedDict, total=False):
    """The revision a run records: what the server shows, else what was declared, and where it
    came from; `revision_declared` when a declared revision disagrees with the one served."""

    revision: str | None
    revision_source: str | None
    revision_declared: Declared


def resolve_revision(root: str | None, profile_revision: str | None,
                     environ: Mapping[str, str] | None = None) -> Revision:
    """``{"revision", "revision_source"}`` (both None when nothing tells), plus
    ``revision_declared`` when a declared revision disagrees with the one the server shows."""
    env = os.environ if environ is None else environ
    declared = [(v.strip(), src) for v, src in ((env.get(SERVE_REVISION_ENV) or "", SERVE_REVISION_ENV),
                                                 (profile_revision or "", "profile")) if v.strip()]
    seen = observed_revision(root)
    if seen is not None:
        out: Revision = {"revision": seen[0], "revision_source": seen[1]}
        first = declared[0] if declared else None
        if first is not None and first[0].lower() != seen[0].lower():
            out["revision_declared"] = {"revision": first[0], "source": first[1]}
        return out
    if declared:
        return {"revision": declared[0][0], "revision_source": declared[0][1]}
    return {"revision": None, "revision_source": None}


def server_label(kind: str, version: str | None) -> str:
    """The page record's ``server``: "vllm 0.11.0", or the kind alone when it told no version."""
    return f"{kind} {version}" if version else kind


def version_from(answer: Any) -> str | None:
    """The version in an answer of /version or /get_server_info."""
    if isinstance(answer, dict):
        value = answer.get("version")
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value).strip()[:100]
    return None

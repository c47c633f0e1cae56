"""A run directory's layout in one place: every path of RUN/, its run.json, and the provenance
run.json records (versions, git commit)."""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAGES_FILE = "pages.jsonl"
RUN_JSON = "run.json"
FIGURES_FILE = "figures.jsonl"


@dataclass(frozen=True)
class RunDir:
    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    @property
    def pages(self) -> Path:
        return self.path / PAGES_FILE

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def docs(self) -> Path:
        return self.path / "docs"

    def doc(self, doc_id: str) -> Path:
        return self.docs / f"{doc_id}.md"

    @property
    def figures(self) -> Path:
        return self.path / FIGURES_FILE

    def info(self) -> dict[str, Any]:
        """run.json, or {} when there is none (or it cannot be read: it is rewritten whole at
        every start and end of a run, so a reader never needs to fail on it)."""
        try:
            data = json.loads(self.run_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- provenance


def versions(engine_versions: dict[str, str | None]) -> dict[str, str | None]:
    """vlmocr's versions and those of the libraries every run uses, plus the engine's own
    (`engines.registry.CpuEngine.versions`), for run.json."""
    import PIL

    from . import __version__

    v: dict[str, str | None] = {
        "vlmocr": __version__,
        "python": platform.python_version(),
        "pypdfium2": dist_version("pypdfium2"),
        "pdfium": _pdfium_build(),
        "pillow": PIL.__version__,
    }
    return {**v, **engine_versions}


def dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _pdfium_build() -> str | None:
    try:
        from pypdfium2.version import PDFIUM_INFO

        return str(PDFIUM_INFO)
    except Exception:
        return None


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except Exception:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

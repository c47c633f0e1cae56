"""A run directory's layout in one place: every path of RUN/ and its run.json."""

from __future__ import annotations

import json
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

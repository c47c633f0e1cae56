"""A run directory's layout in one place: every path of RUN/, its run.json, the provenance
run.json records (versions, git commit). The file a record's `source` names is found by
inputs/finder.py.

A cluster run (`vlmocr slurm`) is a directory of run directories::

    RUN/staged/0001.pdf → /original/weird name.pdf   symlinks under ASCII names
    RUN/staged/originals.csv                         kind,doc_id,staged,original,pages,dpi
    RUN/shards/K/                                    shard K's run directory
    RUN/shards/NAME-K/                               shard K of part NAME (`slurm submit --part`)
"""

from __future__ import annotations

import csv
import json
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .record import JsonObject
from .store import PAGES_FILE as PAGES_FILE  # re-exported: the file name messages say
from .store import FinalRecords, final_index

RUN_JSON = "run.json"
# What `vlmocr slurm status` reads of a shard instead of its records (seed 000: nothing
# heavy on the login node): pages owed and done by status group, rewritten by the run whole.
SUMMARY_JSON = "summary.json"
FIGURES_FILE = "figures.jsonl"
DOCS_DIR = "docs"
CLEAN_DIR = "clean"
# A cluster run's own layout (the rest of it: cluster/slurm/layout.py).
STAGED = "staged"
SHARDS = "shards"
MERGED = "merged"  # `vlmocr merge`: a SLURM run's shards as one ordinary run folder
ORIGINALS = "originals.csv"


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
    def summary_json(self) -> Path:
        return self.path / SUMMARY_JSON

    def summary(self) -> dict[str, Any] | None:
        """summary.json (the run's own tally, kept current while it reads), None without a
        usable one: runs before it existed, or a file another program broke."""
        try:
            data = json.loads(self.summary_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("schema") == 1 else None

    @property
    def docs(self) -> Path:
        return self.path / DOCS_DIR

    def doc(self, doc_id: str) -> Path:
        return self.docs / f"{doc_id}.md"

    @property
    def figures(self) -> Path:
        return self.path / FIGURES_FILE

    @property
    def clean_pages(self) -> Path:
        """The cleaned layer's records (`vlmocr clean`)."""
        return self.path / CLEAN_DIR / PAGES_FILE

    def reading(self) -> FinalRecords:
        """The final records of the folder's reading: the settings keys run.json names (a folder
        holds one reading; records of another are history, never shown as this one's).
        A mapping read from the file as it is gone through: one page's text in memory at a time."""
        return final_index(self.pages, keys=run_keys(self.run_info()))

    def run_info(self) -> "RunInfo":
        """run.json as a RunInfo (an empty one when there is none or it cannot be read; a field of
        the wrong type is left out rather than failing the reader, as `info()` never fails)."""
        return RunInfo.read(self.info())

    def info(self) -> dict[str, Any]:
        """run.json, or {} when there is none (or it cannot be read: it is rewritten whole at
        every start and end of a run, so a reader never needs to fail on it)."""
        return self.read_info()[0]

    def read_info(self) -> tuple[dict[str, Any], str | None]:
        """run.json and, when it could not be used, why (for a reader that says so)."""
        try:
            data = json.loads(self.run_json.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}, "not found"
        except (OSError, ValueError) as exc:
            return {}, f"unreadable ({exc})"
        if not isinstance(data, dict):
            return {}, f"unreadable (a JSON {type(data).__name__}, not an object)"
        return data, None

    # ------------------------------------------------------------ a cluster run (vlmocr slurm)

    @property
    def staged(self) -> Path:
        return self.path / STAGED

    @property
    def originals_csv(self) -> Path:
        return self.staged / ORIGINALS

    @property
    def merged(self) -> "RunDir":
        """RUN/merged: a SLURM run's shards as one run folder (cluster/merge.py writes it)."""
        return RunDir(self.path / MERGED)

    @property
    def shards(self) -> Path:
        return self.path / SHARDS

    def shard(self, k: int | str) -> "RunDir":
        return RunDir(self.shards / str(k))

    def shard_runs(self) -> list[Path]:
        """RUN/shards/*/ that hold records, in shard order: 1, 2, …, 10, then each part's
        (``slurm submit --part NAME``: NAME-1, NAME-2, …, NAME-10), then other names."""
        if not self.shards.is_dir():
            return []
        found = [p for p in self.shards.iterdir() if p.is_dir() and RunDir(p).pages.is_file()]

        def order(p: Path) -> tuple[int, str, int]:
            if p.name.isdigit():
                return 0, "", int(p.name)
            part, _, k = p.name.rpartition("-")
            return (1, part, int(k)) if part and k.isdigit() else (2, p.name, 0)

        return sorted(found, key=order)

    @property
    def cluster(self) -> "RunDir | None":
        """The cluster run this is shard K of (RUN for RUN/shards/K), else None."""
        path = self.path.resolve()
        return RunDir(path.parent.parent) if path.parent.name == SHARDS else None

    def originals(self) -> list[dict[str, str]]:
        """The rows of RUN/staged/originals.csv (staged name → original file), [] without one."""
        if not self.originals_csv.is_file():
            return []
        with self.originals_csv.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))


class RunInfo(BaseModel):
    """RUN/run.json: what a run was asked, what it chose, what served it, and how it went. The
    scheduler fills one and writes it whole at every start and end of a run (reading/scheduler.py);
    readers take it typed (RunDir.run_info). Fields other writers add (merge's `merged_from`)
    are kept (extra="allow")."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: int = Field(1, alias="schema")
    settings: JsonObject = Field(default_factory=dict)  # RunConfig.public_dict(): never secrets
    key: str | None = None  # the run-level settings key: the folder's reading
    keys: list[str] = Field(default_factory=list)  # every key its documents were read under
    key_material: JsonObject = Field(default_factory=dict)
    engine_choice: dict[str, str] | None = None  # `auto`'s choice of OCR engine, and why
    versions: dict[str, str | None] = Field(default_factory=dict)
    git_commit: str | None = None
    server: JsonObject | None = None  # what served a VLM's pages (reading/served.py)
    workers: JsonObject | None = None  # the pool started, and why (machine.py)
    host: str | None = None
    documents: int | None = None
    skipped: JsonObject = Field(default_factory=dict)  # files of a folder that are no documents
    shard: str | None = None
    current: JsonObject = Field(default_factory=dict)  # this (or the last) invocation
    history: list[JsonObject] = Field(default_factory=list)  # finished invocations, newest last
    summary: JsonObject | None = None  # the outcome, once the run ends

    @classmethod
    def read(cls, data: dict[str, Any]) -> "RunInfo":
        try:
            return cls.model_validate(data)
        except ValidationError:
            # A run.json another version wrote, or edited by hand: keep what parses.
            fields = {name: value for name, value in data.items() if _valid_field(cls, name, value)}
            return cls.model_validate(fields)

    def reading(self) -> str:
        """`reading 29e8530485f0 (engine auto, reader rapidocr, dpi 200.0)`: the folder's reading as
        the commands that read it name it, or what they read without a run.json."""
        if not self.key:
            return "every reading (no run.json names one: the last record of each page)"
        return f"reading {self.key[:12]} ({reading_said(self.key_material)})"

    def as_json(self) -> dict[str, Any]:
        data = self.model_dump(by_alias=True, mode="json")
        return {k: v for k, v in data.items() if not (k in _WRITTEN_WHEN_SET and v is None)}


def reading_said(material: dict[str, Any]) -> str:
    """A reading's settings for a person: engine, reader, model, prompt, sizing."""
    parts = [f"{k} {material[k]}" for k in ("engine", "reader", "model", "prompt_id", "lang") if material.get(k)]
    sizing = material.get("sizing") or {}
    parts += [f"{k} {v}" for k, v in sizing.items() if v and k in ("dpi", "longest_side")]
    return ", ".join(parts) or "?"


# Fields run.json holds only when set, as it always had them.
_WRITTEN_WHEN_SET = ("engine_choice", "server", "workers", "summary")


def _valid_field(model: type[BaseModel], name: str, value: Any) -> bool:
    try:
        model.model_validate({name: value})
        return True
    except ValidationError:
        return False


def run_keys(info: dict[str, Any] | RunInfo) -> set[str] | None:
    """The settings keys run.json names (records under other keys are stale), None without any."""
    keys = info.keys if isinstance(info, RunInfo) else info.get("keys")
    return set(keys or []) or None


# ---------------------------------------------------------------- the file a record names



# ---------------------------------------------------------------- provenance


def versions(engine_versions: dict[str, str | None]) -> dict[str, str | None]:
    """vlmocr's versions and those of the libraries every run uses, plus the engine's own
    (`engines.registry.CpuEngine.versions`), for run.json."""
    import PIL

    from .. import __version__

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
    """The commit this vlmocr was built from (vlmocr/_build.py, which setup.py writes into a
    wheel), else the HEAD of the checkout it runs from (an editable install, the source tree) —
    only a checkout holding this very package, not a repository an install happens to sit in."""
    try:
        from .._build import GIT_COMMIT

        return str(GIT_COMMIT)
    except ImportError:
        pass
    here = Path(__file__).resolve().parents[1]  # the package: src/vlmocr in a checkout
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):  # no git, or it hangs
        return None
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() / "src" / "vlmocr" != here:
        return None
    return lines[1]

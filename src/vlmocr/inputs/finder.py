"""The file a record's ``source`` names, found again after the run: where exports, reports,
thumbnails, figure crops and the cascade's later tiers look for the page's document."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..exceptions import UsageError
from ..runfolder.rundir import RunDir
from .sources import discover


class SourceFinder:
    """The file a record's ``source`` names. Records carry ``source`` as the run was given it (a
    path relative to the run's cwd, a manifest's spelling, a SLURM shard's staged name). Tried in
    order, the first existing file wins:

    1. a SLURM shard's original file (RUN/staged/originals.csv, by staged name or its file name);
    2. the path itself, when it is absolute (and nothing else then);
    3. relative to each root: every ``--source-root``, the cwd, the run directory's parent and the
       run directory itself (as given, then resolved), for a shard RUN/staged and RUN's parent,
       then the manifest's folder (the manifest as found under these roots, and as recorded);
    4. with a doc id, the run's own inputs (run.json settings) discovered again, which also finds
       staged copies of a manifest's documents.

    Answers are cached (``missing`` lists the sources not found); ``find`` may be called from
    threads. ``resolve`` gives the found path resolved (symlinks followed), e.g. to name a
    thumbnail after the file itself."""

    def __init__(self, run_dir: str | Path, source_roots: Iterable[str | Path] = (), *,
                 settings: dict[str, Any] | None = None, originals: list[dict[str, str]] | None = None,
                 resolve: bool = False) -> None:
        run = RunDir(run_dir)
        if settings is None:
            settings = run.info().get("settings") or {}
        self.settings: dict[str, Any] = settings if isinstance(settings, dict) else {}
        self.resolve = resolve
        cluster = run.cluster
        if originals is None:
            originals = cluster.originals() if cluster is not None else []
        self.originals = {r["staged"]: r["original"] for r in originals if r.get("staged") and r.get("original")}
        given = run.path.absolute()
        resolved = run.path.resolve()
        roots = [Path(r) for r in source_roots] + [Path.cwd(), given.parent, given, resolved.parent, resolved]
        if cluster is not None:
            roots += [cluster.staged, cluster.path.parent]
        self.manifest: Path | None = None  # the run's manifest, where it was found
        recorded = self.settings.get("manifest")
        if recorded:
            m = Path(recorded)
            self.manifest = _first_file([m] if m.is_absolute() else [r / m for r in roots])
            if self.manifest is not None:
                roots.append(self.manifest.parent)
            roots.append(m.parent)
        self.roots = list(dict.fromkeys(roots))
        self._by_doc: dict[str, Path] | None = None
        self._cache: dict[tuple[str, str], Path | None] = {}
        self._lock = threading.Lock()

    def original(self, source: str) -> str | None:
        """The original file a SLURM shard's staged `source` stands for."""
        return self.originals.get(source) or self.originals.get(Path(source).name)

    def find(self, source: str, doc_id: str = "") -> Path | None:
        key = (source, doc_id)
        if key not in self._cache:
            found = self._find(source, doc_id)
            if found is not None and self.resolve:
                found = found.resolve()
            self._cache[key] = found
        return self._cache[key]

    def missing(self) -> list[str]:
        """The sources asked for and not found, sorted."""
        return sorted({source for (source, _doc), found in self._cache.items() if found is None})

    def _find(self, source: str, doc_id: str) -> Path | None:
        if source:
            candidates: list[Path] = []
            original = self.original(source)
            if original:
                candidates.append(Path(original))
            given = Path(source)
            candidates += [given] if given.is_absolute() else [root / given for root in self.roots]
            found = _first_file(candidates)
            if found is not None:
                return found
        if not doc_id:
            return None
        return _first_file([p for p in [self._discovered().get(doc_id)] if p is not None])

    def _discovered(self) -> dict[str, Path]:
        with self._lock:  # pages look up their sources from threads: discover once
            if self._by_doc is None:
                try:
                    docs = discover(self.settings.get("inputs") or [], self.settings.get("manifest"))
                    self._by_doc = {d.doc_id: Path(d.path) for d in docs}
                except (UsageError, OSError, ValueError):  # inputs moved or gone
                    self._by_doc = {}
            return self._by_doc


def _first_file(candidates: Iterable[Path]) -> Path | None:
    for c in candidates:
        try:
            if c.is_file():
                return c
        except OSError:
            continue
    return None

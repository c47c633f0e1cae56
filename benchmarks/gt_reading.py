"""Reading the ground-truth pages of ../shared/gt (`VLMOCR_GT` overrides) as `vlmocr run` reads
them, with a cache of the readings. Shared by bench_signal.py (the quality signal), bench_engines.py
(CER, speed and memory per engine) and tune_rapidocr.py; not a benchmark itself.

A page is rendered by `vlmocr.inputs.render.render_page` with the default sizing and read by the engine
`make_cpu_engine` builds for a pool worker (one thread; Tesseract with OMP_THREAD_LIMIT=1 and the
language data a user of that collection would pass as `--lang`). Each reading is cached in
benchmarks/data/signal_readings.json (OCR of the ../shared/gt pages; their sources and licences
are in its pages.csv) under `ENGINE/PAGE`, where ENGINE carries RapidOCR's settings tag
(`rapidocr@cls0 side2000 …`) and, after `#`, what made the reading: the engine's versions (the
library, its runtime, Tesseract and its data, as run folders record them) and vlmocr's code that
renders a page and reads it (engines/, positions/, inputs/). A reading made with other settings,
another release or other code is never taken for the current one: it is read again. Every RESULT
line says how many of its readings came from the cache (`tally()`). Two invocations may fill the
cache at once (writes are locked and merged).
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

os.environ["OMP_THREAD_LIMIT"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

from vlmocr.engines.base import PageInput
from vlmocr.engines.registry import make_cpu_engine
from vlmocr.inputs.render import ink_share, render_page
from vlmocr.runfolder.record import Sizing

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
CACHE = REPO / "benchmarks" / "data" / "signal_readings.json"
ENGINES = ("rapidocr", "tesseract")
# The Tesseract language data for a page (pages.csv: ISO 639-3 language, ISO 15924 script):
# what a user reading that collection would pass as --lang.
TESS_LANG = {("deu", "Latf"): "frk", ("grc", "Grek"): "grc"}


def tess_lang(language: str, script: str) -> str:
    return TESS_LANG.get((language, script), language)


def gt_pages(limit: int | None = None, sets: list[str] | None = None, per_set: int | None = None) -> list[dict[str, str]]:
    """The rows of pages.csv: the first `limit` overall, only `sets`, the first `per_set` of each set."""
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if sets:
        unknown = set(sets) - {r["set"] for r in rows}
        if unknown:
            raise SystemExit(f"pages.csv has no set {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r["set"] in sets]
    if per_set:
        seen: dict[str, int] = {}
        kept = []
        for r in rows:
            seen[r["set"]] = seen.get(r["set"], 0) + 1
            if seen[r["set"]] <= per_set:
                kept.append(r)
        rows = kept
    return rows[:limit] if limit else rows


def over_pages_with_images(fn: Any, workers: int, sets: list[str] | None = None) -> list[Any]:
    """`fn(row)` for every row of pages.csv (of `sets`) whose image is there, in `workers`
    processes, in the rows' order."""
    from concurrent.futures import ProcessPoolExecutor

    rows = [r for r in gt_pages(sets=sets) if (GT / r["image"]).is_file()]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(fn, rows))


def truth(row: dict[str, str]) -> str:
    return (GT / row["truth"]).read_text(encoding="utf-8")


@lru_cache(maxsize=8)
def made_by(engine: str) -> str:
    """A digest of what a reading by `engine` depends on beyond its settings: the versions its
    registry entry reports (what run folders record) and vlmocr's code that renders and reads."""
    import vlmocr
    from vlmocr.engines.registry import CPU_ENGINES

    h = hashlib.sha256(repr(sorted(CPU_ENGINES[engine].versions().items())).encode())
    root = Path(vlmocr.__file__).resolve().parent
    for folder in ("engines", "positions", "inputs"):
        for path in sorted((root / folder).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def engine_key(engine: str, settings: dict[str, Any] | None = None) -> str:
    """The cache's name for an engine with its settings and what made its readings: RapidOCR's
    carry its settings tag (the tuned ones unless `settings` is given)."""
    if engine != "rapidocr":
        return f"{engine}#{made_by(engine)}"
    from vlmocr.engines.rapidocr import settings_tag

    return f"rapidocr@{settings_tag(settings)}#{made_by(engine)}"


# The readings a benchmark used, by where they came from: (key, page) pairs.
_FROM_CACHE: set[tuple[str, str]] = set()
_READ_NOW: set[tuple[str, str]] = set()


def cached(cache: dict[str, dict[str, Any]], key: str, page: str) -> dict[str, Any] | None:
    # Entries under other keys (`rapidocr/PAGE`, older tags, another `#` digest) were read with
    # other settings, another release or other code: never taken for the current ones.
    entry = cache.get(f"{key}/{page}")
    if entry is not None:
        note_cached(key, page)
    return entry


def note_cached(key: str, page: str) -> None:
    """A reading taken from a cache of the benchmark's own (counted by `tally`)."""
    if (key, page) not in _READ_NOW:
        _FROM_CACHE.add((key, page))


def note_read(key: str, page: str) -> None:
    """A reading made now (counted by `tally`)."""
    _READ_NOW.add((key, page))
    _FROM_CACHE.discard((key, page))


def tally() -> str:
    """How many readings this process took from the cache and how many it read: for RESULT lines."""
    return f"[readings: {len(_FROM_CACHE)} from the cache, {len(_READ_NOW)} read now]"


def load_cache(path: Path = CACHE) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _save_cache(path: Path, cache: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, ensure_ascii=False, sort_keys=True, indent=0), encoding="utf-8")
    tmp.replace(path)


def store(path: Path, key: str, page: str, entry: dict[str, Any]) -> None:
    """Add one reading under a lock, re-reading the file first: another invocation may be
    filling it at the same time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(Path(tempfile.gettempdir()) / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cache = load_cache(path)
        cache[f"{key}/{page}"] = entry
        _save_cache(path, cache)


def peak_rss_kb() -> tuple[int, int]:
    """Peak resident set of this process and of its largest finished child (Tesseract's CLI
    runs as a child of the worker), in KiB."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (Tesseract's CLI): on a shared,
    loaded machine, what a page costs a free core; wall time says what the load did to it."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def read_one(engine: str, row: dict[str, str], engines: dict[tuple[str, str], Any],
             settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Render and read one page as a `vlmocr run` worker does; the reading with its facts.
    `engines` keeps the engines built so far (one per engine and language) between calls."""
    lang = tess_lang(row["language"], row["script"])
    built = (engine_key(engine, settings), lang if engine == "tesseract" else "")
    if built not in engines:
        options: dict[str, Any] = {"lang": lang, "threads": 1}
        engines[built] = (make_cpu_engine(engine, options) if settings is None
                          else _rapidocr_with(settings))
    path = GT / row["image"]
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    rendered = render_page(path, 1, Sizing())
    same = str(rendered.same_as_file) if rendered.same_as_file else None
    reading = engines[built].read(PageInput(row["name"], 1, rendered.image, None, rendered.dpi, [], same))
    seconds = time.perf_counter() - t0
    cpu = _cpu_seconds() - cpu0
    rss, rss_child = peak_rss_kb()
    return {
        "text": reading.text, "confidence": reading.confidence, "line_confidences": reading.line_confidences,
        "ink": ink_share(rendered.image), "model": reading.model, "dpi": rendered.dpi,
        "width": rendered.image.width, "height": rendered.image.height,
        "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "rss_kb": rss, "child_rss_kb": rss_child,
    }


def _rapidocr_with(settings: dict[str, Any]) -> Any:
    from vlmocr.engines.rapidocr import RapidOcrEngine

    return RapidOcrEngine(threads=1, settings=settings)


def read_missing(rows: list[dict[str, str]], engine: str, cache_path: Path = CACHE, refresh: bool = False,
                 reverse: bool = False, settings: dict[str, Any] | None = None,
                 engines: dict[tuple[str, str], Any] | None = None) -> dict[str, dict[str, Any]]:
    """Read every page of `rows` the cache lacks for this engine (all with `refresh`) and return
    the cache. `reverse` starts from the last page, so a second invocation shares the work."""
    key = engine_key(engine, settings)
    engines = {} if engines is None else engines
    todo = [r for r in rows if refresh or cached(load_cache(cache_path), key, r["name"]) is None]
    if reverse:
        todo.reverse()
    for i, row in enumerate(todo, 1):
        if not refresh and cached(load_cache(cache_path), key, row["name"]) is not None:
            continue  # another invocation (--reverse) read it meanwhile
        entry = read_one(engine, row, engines, settings)
        store(cache_path, key, row["name"], entry)
        note_read(key, row["name"])
        print(f"[{key} {i}/{len(todo)}] {row['name']}: {entry['seconds']:.1f} s", file=sys.stderr, flush=True)
    return load_cache(cache_path)

#!/usr/bin/env python3
"""Where a page's time goes on the default path (`vlmocr run`, `--engine auto`): each page read
by the worker's own `read_page` in this process, one thread (as a pool worker reads), under
cProfile, and its time split into the stages a reader would name:

* render — the page rasterised or decoded (inputs/render.py);
* look — what the preparation asks before reading: blank, negative, skew, upright (reading/prepare.py
  minus the render);
* detection, classification, recognition — RapidOCR's three models (onnxruntime), recognition
  also as the model's own run against its pre- and post-processing;
* tesseract — Tesseract's process (the engine the default picks for Fraktur and Greek);
* line grouping — RapidOCR's boxes made lines and positions (engines/rapidocr.py);
* signal — the reading classified and judged (text/quality.py, text/signal.py, reading/judging.py);
* turn check — OSD and the upright model, asked when a reading fails (reading/orientation.py);
* other — the rest of read_page (the record, positions).

Then what every run pays before its first page: a worker's pool start (forkserver, the preload
imports) and the engine's making (models loaded), timed apart.

Pages: `--per-set N` pages of each set of ../shared/gt (`VLMOCR_GT` overrides), each with the
engine `auto` picks for its language on this machine, and the born-digital samples/ PDF read as
scans (`--engine rapidocr`, their text layer ignored) for pages with no history.

    python benchmarks/profile_page.py                    # 2 pages a set
    python benchmarks/profile_page.py --per-set 4 --top 30
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ["OMP_THREAD_LIMIT"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.pop("VLMOCR_PLUGINS", None)  # the engine's own reading, never a test cache's

import gt_reading as gt  # noqa: E402

from vlmocr.engines.choice import best_for, data_languages  # noqa: E402
from vlmocr.reading.context import PageContext  # noqa: E402
from vlmocr.reading.worker import read_page  # noqa: E402
from vlmocr.runfolder.record import PageTask, Sizing  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# Stage → (file path suffix, function name) whose cumulative time is the stage's. Nested stages
# are taken out of the ones they sit in (recognition's model run out of recognition, the models
# out of the engine's read).
STAGES: dict[str, list[tuple[str, str]]] = {
    "render": [("vlmocr/inputs/render.py", "render_page")],
    "prepare": [("vlmocr/reading/prepare.py", "prepare_image")],
    "detection": [("rapidocr/ch_ppocr_det/main.py", "__call__")],
    "classification": [("rapidocr/ch_ppocr_cls/main.py", "__call__")],
    "recognition": [("rapidocr/ch_ppocr_rec/main.py", "__call__")],
    "onnxruntime run": [("onnxruntime/capi/onnxruntime_inference_collection.py", "run")],
    "tesseract": [("vlmocr/engines/tesseract.py", "read")],
    "line grouping": [("vlmocr/engines/rapidocr.py", "reading")],
    "signal": [("vlmocr/text/quality.py", "classify"), ("vlmocr/reading/judging.py", "judge_reading")],
    "turn check": [("vlmocr/reading/worker.py", "_read_turned")],
    "read_page": [("vlmocr/reading/worker.py", "read_page")],
}


def stage_seconds(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each stage's functions (the first of a stage's names that occurs)."""
    out: dict[str, float] = defaultdict(float)
    for (path, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for stage, where in STAGES.items():
            if any(path.endswith(suffix) and name == fn for suffix, fn in where):
                out[stage] += ct
    return out


def pages(per_set: int) -> list[tuple[str, PageTask, PageContext]]:
    installed = data_languages()
    out = []
    for row in gt.gt_pages(per_set=per_set):
        image = gt.GT / row["image"]
        if not image.is_file():
            continue
        lang = gt.tess_lang(row["language"], row["script"])
        reader = best_for(lang, installed).engine if installed is not None else "rapidocr"
        task = PageTask(doc_id=row["name"], source=str(image), path=str(image), page=1, doc_pages=1, key="profile",
                        engine="auto", reader=reader, sizing=Sizing(), language=lang)
        out.append((f"{row['set']}:{reader}", task, PageContext(lang=lang, lang_given=True)))
    pdf = REPO / "samples" / "born-digital.pdf"
    from vlmocr.inputs.render import count_pages

    for page in range(1, count_pages(pdf) + 1):
        task = PageTask(doc_id="born-digital", source=str(pdf), path=str(pdf), page=page, doc_pages=None,
                        key="profile", engine="rapidocr", reader="rapidocr", sizing=Sizing(), language="eng")
        out.append(("born-digital:rapidocr", task, PageContext(lang="eng", lang_given=True)))
    return out


def startup_seconds() -> dict[str, float]:
    """A pool's start (one worker, the run's preload) and each engine's making, in fresh processes."""
    import subprocess

    code = ("import time; from vlmocr.reading import worker; from vlmocr.reading.pool import WorkerPool; "
            "t=time.perf_counter(); p=WorkerPool(1, {'preload': ('rapidocr', 'tesseract')}); "
            "p._pool.submit(worker.warm).result(); print(time.perf_counter()-t); p.shutdown()")
    out: dict[str, float] = {}
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        out["pool start (1 worker)"] = float(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, subprocess.TimeoutExpired):
        pass
    for engine in ("rapidocr", "tesseract"):
        code = ("import time; from vlmocr.engines.registry import CPU_ENGINES, preload_modules; import importlib; "
                f"[importlib.import_module(m) for m in preload_modules(['{engine}'])]; t=time.perf_counter(); "
                f"CPU_ENGINES['{engine}'].build({{'threads': 1, 'lang': 'eng'}}); print(time.perf_counter()-t)")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        try:
            out[f"{engine} made (models loaded)"] = float(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-set", type=int, default=2)
    ap.add_argument("--top", type=int, default=0, help="also the N functions of most own time over all pages")
    args = ap.parse_args(argv)
    if not (gt.GT / "pages.csv").exists():
        print(f"no ground truth at {gt.GT} (set VLMOCR_GT)", file=sys.stderr)
        return 3
    todo = pages(args.per_set)
    groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    wall: dict[str, float] = defaultdict(float)
    everything = None
    read_page(todo[0][1], todo[0][2])  # the engines made and warm: what a page costs, not a start
    for label, task, ctx in todo:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        rec = read_page(task, ctx)
        prof.disable()
        wall[label] += time.perf_counter() - t0
        counts[label] += 1
        stats = pstats.Stats(prof)
        for stage, s in stage_seconds(stats).items():
            groups[label][stage] += s
        everything = stats if everything is None else everything.add(prof)  # type: ignore[arg-type]
        print(f"{label} {task.doc_id} p{task.page}: {time.perf_counter() - t0:.2f} s {rec.status}", file=sys.stderr)
    cols = ["render", "look", "detection", "classification", "recognition", "(its model run)", "tesseract",
            "line grouping", "signal", "turn check", "other"]
    print("seconds a page (share of the page's time), one thread\n")
    print("| pages | n | s/page | " + " | ".join(cols) + " |")
    print("|---|---:|---:|" + "---:|" * len(cols))
    for label in sorted(groups):
        g, n = groups[label], counts[label]
        total = g["read_page"] or wall[label]
        look = max(0.0, g["prepare"] - g["render"])
        models = g["detection"] + g["classification"] + g["recognition"]
        rec_model = min(g["onnxruntime run"], models)  # the three models' runs, shown beside recognition
        known = g["prepare"] + models + g["tesseract"] + g["line grouping"] + g["signal"]
        turn = g["turn check"]
        other = max(0.0, total - known - max(0.0, turn - 0))
        cells = [g["render"], look, g["detection"], g["classification"], g["recognition"], rec_model,
                 g["tesseract"], g["line grouping"], g["signal"], turn, other]
        print(f"| {label} | {n} | {total / n:.2f} | " + " | ".join(f"{c / n:.2f} ({c / total:.0%})" for c in cells) + " |")
    for what, seconds in startup_seconds().items():
        print(f"STARTUP {what}: {seconds:.2f} s")
    if args.top and everything is not None:
        everything.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())

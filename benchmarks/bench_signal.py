#!/usr/bin/env python3
"""The quality signal against ground truth: does it flag the pages read worse than 10 % CER?

Every page of ../shared/gt (`VLMOCR_GT` overrides) is read with each CPU engine (RapidOCR, and
Tesseract with the page's language data, OMP_THREAD_LIMIT=1), rendered as `vlmocr run` renders
it (benchmarks/gt_reading.py, shared with bench_engines.py). The readings (text, engine
confidences, the page's ink share, seconds) are cached in a JSON file, so re-calibrating after a
change to the signal costs seconds, not the hour of reading: only pages missing from the cache
are read (`--refresh` reads everything again). RapidOCR's readings are cached per settings tag:
after its settings change, its pages are read again. The cache
(benchmarks/data/signal_readings.json) holds OCR of the ../shared/gt pages; their sources and
licences are in its pages.csv. Two invocations may fill it at once (one with `--reverse`).

For every reading: its CER (`vlmocr.evaluation.score`) and its signal (`vlmocr.text.signal`,
language given as `--lang` would give it). Then, per engine and script, the score threshold
that flags at least `--recall` of the pages above 10 % CER with the best precision, and the
precision and recall of the rule in force (the thresholds file) — overall and per set.

    python benchmarks/bench_signal.py                      # read what is not cached, report
    python benchmarks/bench_signal.py --fit                # also print the fitted thresholds
    python benchmarks/bench_signal.py --fit --write        # … and write them to the thresholds file
    python benchmarks/bench_signal.py --engines tesseract --limit 5   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import gt_reading as gt
from gt_reading import CACHE, ENGINES, GT, tess_lang

from vlmocr.evaluation.score import cer
from vlmocr.text import signal

BAD_CER = 0.10


def gt_pages(limit: int | None) -> list[dict[str, str]]:
    return gt.gt_pages(limit)


def read_all(rows: list[dict[str, str]], engine_names: list[str], cache_path: Path, refresh: bool,
             reverse: bool = False) -> dict:
    """Read what the cache lacks (benchmarks/gt_reading.py: as `vlmocr run` reads a page; RapidOCR's
    readings are kept per settings, so a new setting is read again, not mixed with the old)."""
    for name in engine_names:
        gt.read_missing(rows, name, cache_path, refresh, reverse)
    return gt.load_cache(cache_path)


def evaluate(rows: list[dict[str, str]], engine_names: list[str], cache: dict,
             rule: signal.Rule | None = None) -> list[dict[str, Any]]:
    """One line per cached reading: engine, set, script, CER, the signal and the rule's verdict
    (the rule in force unless `rule` is given)."""
    thresholds = rule or signal.load_thresholds()
    out = []
    for name in engine_names:
        for row in rows:
            entry = gt.cached(cache, gt.engine_key(name), row["name"])
            if entry is None:
                continue
            truth = (GT / row["truth"]).read_text(encoding="utf-8")
            lang = tess_lang(row["language"], row["script"])
            sig = signal.measure(entry["text"], engine=name, lang=lang, confidence=entry["confidence"],
                                 line_confidences=entry["line_confidences"], ink=entry["ink"], rule=thresholds)
            out.append({"engine": name, "set": row["set"], "name": row["name"], "script": sig.script,
                        "cer": cer(entry["text"], truth), "score": sig.score, "signal": sig,
                        "seconds": entry["seconds"],
                        "flagged": signal.is_suspect(sig, name, thresholds)})
    return out


def precision_recall(pages: list[dict[str, Any]], flagged_key: str = "flagged") -> tuple[int, int, int, float, float]:
    bad = sum(p["cer"] > BAD_CER for p in pages)
    flagged = sum(bool(p[flagged_key]) for p in pages)
    hit = sum(p["cer"] > BAD_CER and bool(p[flagged_key]) for p in pages)
    return bad, flagged, hit, (hit / flagged if flagged else 1.0), (hit / bad if bad else 1.0)


def fit(pages: list[dict[str, Any]], recall: float, precision: float = 0.7) -> dict[str, dict[str, float]]:
    """Per engine and script (and `any`: the engine over every script): the score threshold (flag
    below it) with the best recall among those whose precision is at least `precision`, stopping
    at `recall`. A group where no threshold is that precise flags only what scores below every
    good page: a rule that flags good pages by the dozen teaches people to ignore it."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in pages:
        groups[(p["engine"], p["script"])].append(p)
        groups[(p["engine"], "any")].append(p)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (engine, script), group in sorted(groups.items()):
        scores = sorted({p["score"] for p in group})
        good_min = min((p["score"] for p in group if p["cer"] <= BAD_CER), default=1.0)
        best = max(0.0, good_min - 0.005)  # only what scores below every good page
        n_bad = sum(p["cer"] > BAD_CER for p in group)
        if n_bad == len(group):
            # Not one good reading (RapidOCR on Greek: it has no Greek model): flag them all.
            out[engine][script] = round(min(1.0, scores[-1] + 0.005), 3)
            continue
        best_recall = -1.0
        for lo, hi in zip(scores, scores[1:] + [scores[-1] + 0.02]):
            cut = (lo + hi) / 2
            flagged = [p for p in group if p["score"] < cut]
            hit = sum(p["cer"] > BAD_CER for p in flagged)
            rec = hit / n_bad if n_bad else 0.0
            if flagged and hit / len(flagged) >= precision and rec > best_recall:
                best, best_recall = cut, rec
                if rec >= recall:
                    break
        out[engine][script] = round(best, 3)
    return dict(out)


def threshold(fitted: dict[str, dict[str, float]], page: dict[str, Any]) -> float:
    table = fitted.get(page["engine"], {})
    return table.get(page["script"], table.get("any", 0.0))


def leave_one_out(pages: list[dict[str, Any]], recall: float, precision: float = 0.7) -> list[bool]:
    """Each page judged by thresholds fitted on every other page: what the rule would do on a
    page it was not fitted to (the in-sample figures of small groups flatter it)."""
    out = []
    for i, p in enumerate(pages):
        fitted = fit(pages[:i] + pages[i + 1:], recall, precision)
        out.append(p["score"] < threshold(fitted, p))
    return out


# Shaky-line cutoffs tried per engine by --fit (the line score below which a line is garbage).
LINE_CUTOFFS = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92)


def fit_line_cutoff(rows: list[dict[str, str]], engine: str, cache: dict, recall: float,
                    precision: float) -> tuple[float, list[dict[str, Any]]]:
    """The engine's shaky-line cutoff judged on pages the thresholds were not fitted to: for
    each cutoff, thresholds fitted leaving one page out; the cutoff whose leave-one-out rule
    comes nearest both targets (each capped at its target, so overshooting one cannot buy a
    miss of the other), then the larger sum. Returns it and the pages measured with it."""
    base = signal.load_thresholds()
    best: tuple[tuple[float, float], float, list[dict[str, Any]]] | None = None
    for cutoff in LINE_CUTOFFS:
        rule = dataclasses.replace(base, line_confidence={**base.line_confidence, engine: cutoff})
        pages = evaluate(rows, [engine], cache, rule)
        loo = leave_one_out(pages, recall, precision)
        _, _, _, prec, rec = precision_recall([{**p, "flagged": f} for p, f in zip(pages, loo)])
        merit = (min(rec / recall, 1.0) + min(prec / precision, 1.0), rec + prec)
        print(f"  {engine}: shaky below {cutoff:.2f} → leave one out precision {prec:.0%}, recall {rec:.0%}",
              file=sys.stderr)
        if best is None or merit > best[0]:
            best = (merit, cutoff, pages)
    assert best is not None
    return best[1], best[2]


def report(pages: list[dict[str, Any]], title: str) -> None:
    print(f"\n### {title}\n")
    print("| engine | set | pages | CER > 10 % | flagged | both | precision | recall | s/page |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in pages:
        by[(p["engine"], p["set"])].append(p)
        by[(p["engine"], "all")].append(p)
    for (engine, set_name), group in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        bad, flagged, hit, prec, rec = precision_recall(group)
        secs = sum(p["seconds"] for p in group) / len(group)
        bold = "**" if set_name == "all" else ""
        print(f"| {engine} | {bold}{set_name}{bold} | {len(group)} | {bad} | {flagged} | {hit} | "
              f"{prec:.0%} | {rec:.0%} | {secs:.1f} |")
    for engine in sorted({p["engine"] for p in pages}):
        bad, flagged, hit, prec, rec = precision_recall([p for p in pages if p["engine"] == engine])
        print(f"RESULT {engine}: precision {prec:.1%} recall {rec:.1%} ({hit} of {flagged} flagged pages are "
              f"above 10 % CER; {hit} of {bad} such pages flagged) {gt.tally()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--limit", type=int, default=None, help="only the first N pages of pages.csv")
    ap.add_argument("--refresh", action="store_true", help="read every page again")
    ap.add_argument("--reverse", action="store_true",
                    help="read from the last page: a second invocation shares the reading with the first")
    ap.add_argument("--read-only", action="store_true", help="fill the cache; no report")
    ap.add_argument("--cached", action="store_true", help="read nothing: report on the cached readings only")
    ap.add_argument("--fit", action="store_true", help="fit thresholds and show the rule they make")
    ap.add_argument("--recall", type=float, default=0.9, help="recall the fitted thresholds aim at")
    ap.add_argument("--precision", type=float, default=0.7, help="the least precision a fitted threshold may have")
    ap.add_argument("--write", action="store_true", help="with --fit: write them to the thresholds file")
    ap.add_argument("--pages", action="store_true", help="list every page with its CER and signal")
    args = ap.parse_args(argv)
    names = [e for e in args.engines.split(",") if e]
    rows = gt_pages(args.limit)
    cache = gt.load_cache(args.cache) if args.cached else read_all(rows, names, args.cache, args.refresh, args.reverse)
    if args.read_only:
        return 0
    pages = evaluate(rows, names, cache)
    if args.pages:
        for p in sorted(pages, key=lambda p: (p["engine"], p["score"])):
            s = p["signal"]
            print(f"{p['engine']:9} {p['set']:10} {p['name'][:40]:40} cer={p['cer']:.3f} score={p['score']:.3f} "
                  f"{'FLAG' if p['flagged'] else '    '} {s.components_text()}")
    report(pages, f"the rule in force ({signal.THRESHOLDS_FILE.name})")
    if args.fit:
        cutoffs: dict[str, float] = {}
        pages = []
        for name in names:
            cutoffs[name], engine_pages = fit_line_cutoff(rows, name, cache, args.recall, args.precision)
            pages += engine_pages
        print("\nfitted shaky-line cutoffs:", json.dumps(cutoffs))
        fitted = fit(pages, args.recall, args.precision)
        print("\nfitted thresholds (flag a page whose score is below):", json.dumps(fitted, indent=1))
        for p in pages:
            p["fitted"] = p["score"] < threshold(fitted, p)
        report([{**p, "flagged": p["fitted"]} for p in pages], "fitted thresholds (in sample)")
        loo = leave_one_out(pages, args.recall, args.precision)
        report([{**p, "flagged": f} for p, f in zip(pages, loo)], "fitted thresholds, leave one page out")
        if args.write:
            signal.write_thresholds(fitted, line_cutoffs=cutoffs)
            print(f"written to {signal.THRESHOLDS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Per-page engine choice (`--ocr-engine tesseract+rapidocr`) against each engine alone and the
oracle, on the cached readings of ../shared/gt (`VLMOCR_GT` overrides).

The readings are those bench_signal.py caches (benchmarks/data/signal_readings.json, keys
`ENGINE/PAGE`: text, engine confidences, ink share, seconds; ENGINE with its settings and what made
the readings, gt_reading.engine_key), so nothing is read again: only the pages both engines have
read with the current settings, releases and code count. For each page, each reading is classified and judged as a
run judges it (`vlmocr.text.quality.classify`, `vlmocr.text.signal.judge`, the language a user of
that collection passes as `--lang`) and scored against its transcription. Then, over those pages:

* Tesseract alone, RapidOCR alone;
* the oracle: the reading with the lower CER on every page (what a perfect choice reaches);
* the signal's choice as shipped (`vlmocr.engines.pick.pick`: the higher signal score);
* the alternative rule: the higher margin over each engine's own threshold (score − threshold).

CER is given two ways: micro (Σ edits / Σ truth characters: long pages weigh more) and macro
(the mean of the pages' CERs: every page counts once). "Captured" is the share of the oracle's
gain over Tesseract alone that a rule reaches. Time: each engine's seconds as cached (one
thread, on the machine that read them); the composite costs the sum of both.

    python benchmarks/bench_engine_choice.py --cached            # the report
    python benchmarks/bench_engine_choice.py --cached --pages    # … and every page
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gt_reading as gt

from vlmocr.engines.pick import Candidate, pick
from vlmocr.evaluation.score import char_errors
from vlmocr.runfolder.record import Status
from vlmocr.text.quality import classify
from vlmocr.text.signal import judge

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
CACHE = REPO / "benchmarks" / "data" / "signal_readings.json"
ENGINES = ("tesseract", "rapidocr")  # the composite's order: the first wins a tie
# The Tesseract data a user of the collection passes as --lang (pages.csv: language, script);
# as bench_signal.py reads the pages.
TESS_LANG = {("deu", "Latf"): "frk", ("grc", "Grek"): "grc"}


def judged(entry: dict[str, Any], engine: str, lang: str, truth: str) -> dict[str, Any]:
    """One cached reading as a run judges it, with its character errors."""
    status, _ = classify(entry["text"], "stop", blank_image=False)
    quality, suspect = judge(entry["text"], engine, lang=lang, confidence=entry.get("confidence"),
                             line_confidences=entry.get("line_confidences"), ink=entry.get("ink"))
    readable = Status(status) is Status.ok  # ok before the signal's rule: neither empty nor a loop
    edits, n = char_errors(entry["text"], truth)
    return {"quality": quality, "suspect": suspect, "readable": readable, "edits": edits, "chars": n,
            "cer": edits / n if n else float(edits > 0), "seconds": float(entry.get("seconds") or 0.0)}


def pages_with_both(cache: dict[str, Any], keys: dict[str, str]) -> list[dict[str, Any]]:
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row in rows:
        entries = {e: gt.cached(cache, keys[e], row["name"]) for e in ENGINES}
        if not all(entries.values()):
            continue
        truth = (GT / row["truth"]).read_text(encoding="utf-8")
        lang = TESS_LANG.get((row["language"], row["script"]), row["language"])
        out.append({"name": row["name"], "set": row["set"], "lang": lang,
                    **{e: judged(entries[e], e, lang, truth) for e in ENGINES}})
    return out


def by_signal(p: dict[str, Any]) -> str:
    """The shipped rule, as the worker applies it."""
    best, _ = pick([Candidate(e, p[e]["readable"], p[e]["quality"]) for e in ENGINES])
    return ENGINES[best]


def by_margin(p: dict[str, Any]) -> str:
    margin = {e: p[e]["quality"]["score"] - (p[e]["quality"]["threshold"] or 0.0) for e in ENGINES}
    return max(ENGINES, key=lambda e: (margin[e], -ENGINES.index(e)))


def oracle(p: dict[str, Any]) -> str:
    return min(ENGINES, key=lambda e: (p[e]["cer"], ENGINES.index(e)))


def by_script(p: dict[str, Any]) -> str:
    """`--engine auto`, the default: the engine engines/choice.py picks for the page's language
    (its script) with this machine's Tesseract data."""
    from vlmocr.engines.choice import best_for, data_languages

    return best_for(p["lang"], _installed()).engine if data_languages() is not None else "rapidocr"


def _installed() -> Any:
    from vlmocr.engines.choice import data_languages

    global _LANGS
    if _LANGS is None:
        _LANGS = data_languages()
    return _LANGS


_LANGS: Any = None


def escalated(p: dict[str, Any], margin: float | None = None) -> bool:
    """The cascade `tesseract,rapidocr` (issue 30): does Tesseract's reading fail its signal (with
    `margin`: score under its threshold + margin), so that RapidOCR reads the page too? Not a page
    in a script RapidOCR has no model for (polytonic Greek): the cascade does not ask it
    (CpuEngine.reads_script)."""
    from vlmocr.engines.registry import CPU_ENGINES
    from vlmocr.languages import script_of_lang

    t = p["tesseract"]
    q = t["quality"]
    fails = not (t["readable"] and not t["suspect"]) or (
        margin is not None and q["score"] < (q["threshold"] or 0.0) + margin)
    return fails and CPU_ENGINES["rapidocr"].reads_script(script_of_lang(p["lang"]))


def by_cascade(p: dict[str, Any]) -> str:
    """`--engine tesseract,rapidocr`: Tesseract's reading when it passes its signal, else the
    better of the two by the signal (reading/worker.py)."""
    return by_signal(p) if escalated(p) else "tesseract"


RULES: dict[str, Callable[[dict[str, Any]], str]] = {
    "--engine auto (the default: by script)": by_script,
    "tesseract alone": lambda p: "tesseract",
    "rapidocr alone": lambda p: "rapidocr",
    "oracle (lower CER per page)": oracle,
    "signal: higher score (shipped)": by_signal,
    "signal: higher score − threshold": by_margin,
    "cascade tesseract,rapidocr": by_cascade,
}


def aggregate(pages: list[dict[str, Any]], rule: Callable[[dict[str, Any]], str]) -> dict[str, float]:
    chosen = [p[rule(p)] for p in pages]
    edits = sum(c["edits"] for c in chosen)
    chars = sum(c["chars"] for c in chosen)
    return {"micro": edits / chars if chars else 0.0, "macro": sum(c["cer"] for c in chosen) / len(chosen),
            "rapidocr": sum(rule(p) == "rapidocr" for p in pages),
            "right": sum(p[rule(p)]["cer"] <= p[oracle(p)]["cer"] for p in pages),
            "suspect": sum(p[rule(p)]["suspect"] for p in pages)}


def captured(value: float, alone: float, best: float) -> str:
    return f"{(alone - value) / (alone - best):.0%}" if alone != best else "—"


def report(pages: list[dict[str, Any]]) -> None:
    n = len(pages)
    base = aggregate(pages, RULES["tesseract alone"])
    best = aggregate(pages, oracle)
    print(f"\n{n} pages read by both engines\n")
    print("| reading kept | CER micro | CER macro | captured (micro / macro) | pages from RapidOCR | "
          "pages at the lower CER | suspect |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rule in RULES.items():
        a = aggregate(pages, rule)
        print(f"| {name} | {a['micro']:.2%} | {a['macro']:.2%} | {captured(a['micro'], base['micro'], best['micro'])} / "
              f"{captured(a['macro'], base['macro'], best['macro'])} | {a['rapidocr']} | {a['right']} of {n} | "
              f"{a['suspect']} |")
    secs = {e: sum(p[e]["seconds"] for p in pages) / n for e in ENGINES}
    print(f"\nseconds per page (one thread, as cached): tesseract {secs['tesseract']:.1f}, rapidocr "
          f"{secs['rapidocr']:.1f}, both {secs['tesseract'] + secs['rapidocr']:.1f} "
          f"({(secs['tesseract'] + secs['rapidocr']) / secs['tesseract']:.1f}× Tesseract alone)")

    print("\n| set | pages | tesseract | rapidocr | oracle | signal (shipped) | (CER macro) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    sets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pages:
        sets[p["set"]].append(p)
    for name, group in sorted(sets.items()):
        row = [aggregate(group, RULES[r])["macro"] for r in ("tesseract alone", "rapidocr alone")]
        row += [aggregate(group, oracle)["macro"], aggregate(group, by_signal)["macro"]]
        print(f"| {name} | {len(group)} | " + " | ".join(f"{v:.1%}" for v in row) + " | |")
    auto = aggregate(pages, by_script)
    print(f"\nRESULT default path (--engine auto): CER micro {auto['micro']:.2%} macro {auto['macro']:.2%} "
          f"(tesseract alone {base['micro']:.2%} / {base['macro']:.2%})" + " " + gt.tally())
    # The cascade against the default, side by side on the same cached readings: CER, and the
    # engines' time (Tesseract on every page, RapidOCR on the pages it escalates; `auto` the
    # time of the engine it picks).
    casc = aggregate(pages, by_cascade)
    up = [p for p in pages if escalated(p)]
    t_casc = sum(p["tesseract"]["seconds"] + (p["rapidocr"]["seconds"] if escalated(p) else 0.0) for p in pages)
    t_auto = sum(p[by_script(p)]["seconds"] for p in pages)
    print(f"RESULT cascade tesseract,rapidocr: CER micro {casc['micro']:.2%} macro {casc['macro']:.2%} against "
          f"auto's {auto['micro']:.2%} / {auto['macro']:.2%} ({(casc['micro'] - auto['micro']) * 100:+.2f} / "
          f"{(casc['macro'] - auto['macro']) * 100:+.2f} points; goal within 0.3); engine time {t_casc / n:.2f} s a "
          f"page against auto's {t_auto / n:.2f} (×{t_casc / t_auto:.2f}; goal ≤ 0.5); RapidOCR read "
          f"{len(up)} of {n} pages" + " " + gt.tally())
    # With a VLM as the last tier (`--vlm-tier`): the pages each CPU path leaves for review are the
    # ones the GPU reads; the rest never reach it.
    def not_ok(p: dict[str, Any], engine: str) -> bool:
        return p[engine]["suspect"] or not p[engine]["readable"]

    reach = {"tesseract": sum(not_ok(p, "tesseract") for p in pages),
             "tesseract,rapidocr": sum(not_ok(p, by_cascade(p)) for p in pages),
             "auto": sum(not_ok(p, by_script(p)) for p in pages)}
    # The cascade's price of escalating more: Tesseract's reading sent on when its score is under
    # its threshold + m (m = 0: the shipped rule), CER and time against `auto`'s.
    print("\n| escalate below threshold + | RapidOCR reads | CER micro | CER macro | engine time ÷ auto |")
    print("|---:|---:|---:|---:|---:|")
    for m in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08):
        def sent_on(p: dict[str, Any], m: float = m) -> bool:
            return escalated(p, m)

        got = aggregate(pages, lambda p: by_signal(p) if sent_on(p) else "tesseract")
        t = sum(p["tesseract"]["seconds"] + (p["rapidocr"]["seconds"] if sent_on(p) else 0.0) for p in pages)
        print(f"| {m:.2f} | {sum(map(sent_on, pages))} | {got['micro']:.2%} | {got['macro']:.2%} | {t / t_auto:.2f} |")
    print("RESULT vlm tier: pages that reach it after "
          + ", ".join(f"{k} {v}/{n} ({v / n:.0%})" for k, v in reach.items()) + " " + gt.tally())
    result = aggregate(pages, by_signal)
    print(f"RESULT signal choice: CER micro {result['micro']:.2%} macro {result['macro']:.2%} "
          f"(tesseract {base['micro']:.2%} / {base['macro']:.2%}, oracle {best['micro']:.2%} / {best['macro']:.2%}); "
          f"captured {captured(result['micro'], base['micro'], best['micro'])} micro, "
          f"{captured(result['macro'], base['macro'], best['macro'])} macro of the oracle's gain" + " " + gt.tally())


def agreement_report(pages: list[dict[str, Any]], cache: dict[str, Any], keys: dict[str, str]) -> None:
    """Issue 30, point 2: the two readings' character agreement as a signal beside each reading's
    own. Recall and precision, for pages over 10 % CER, of the signal alone and of "signal, or
    agreement below X"."""
    import re

    from rapidfuzz.distance import Levenshtein

    def norm(t: str) -> str:
        return re.sub(r"\s+", " ", t).strip()

    for p in pages:
        a, b = (norm(cache[f"{keys[e]}/{p['name']}"]["text"]) for e in ENGINES)
        p["agreement"] = Levenshtein.normalized_similarity(a, b)
    print("\n| reading | rule | pages > 10 % CER | flagged | recall | precision |")
    print("|---|---|---:|---:|---:|---:|")
    for who, rule in (("auto", by_script), ("tesseract", lambda p: "tesseract"), ("rapidocr", lambda p: "rapidocr")):
        for label, limit in (("signal", None), ("signal or agreement < 0.7", 0.7), ("signal or agreement < 0.8", 0.8)):
            bad = flagged = hit = 0
            for p in pages:
                r = p[rule(p)]
                flag = r["suspect"] or not r["readable"] or (limit is not None and p["agreement"] < limit)
                bad += r["cer"] > 0.10
                flagged += flag
                hit += flag and r["cer"] > 0.10
            print(f"| {who} | {label} | {bad} | {flagged} | {hit / bad if bad else float('nan'):.2f} | "
                  f"{hit / flagged if flagged else float('nan'):.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cached", action="store_true", required=True,
                    help="read nothing: the cached readings only (bench_signal.py fills the cache)")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--rapidocr-key", default=None,
                    help="the cache's name for RapidOCR's readings (default: those of its settings in force)")
    ap.add_argument("--pages", action="store_true", help="list every page: CER and score of each reading")
    ap.add_argument("--agreement", action="store_true",
                    help="also: the readings' agreement as a signal (recall / precision on pages over 10 %% CER)")
    args = ap.parse_args(argv)
    if not (GT / "pages.csv").exists():
        print(f"no ground truth at {GT} (set VLMOCR_GT)", file=sys.stderr)
        return 3
    cache = json.loads(args.cache.read_text(encoding="utf-8"))
    keys = {"tesseract": gt.engine_key("tesseract"), "rapidocr": args.rapidocr_key or gt.engine_key("rapidocr")}
    pages = pages_with_both(cache, keys)
    if not pages:
        print("no page has readings of both engines in the cache", file=sys.stderr)
        return 1
    if args.pages:
        for p in pages:
            cells = "  ".join(f"{e} cer={p[e]['cer']:.3f} score={p[e]['quality']['score']:.3f}" for e in ENGINES)
            print(f"{p['set']:10} {p['name'][:34]:34} {cells}  kept={by_signal(p)} best={oracle(p)}")
    report(pages)
    if args.agreement:
        agreement_report(pages, cache, keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())

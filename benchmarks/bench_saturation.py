#!/usr/bin/env python3
"""Saturation: does `vlmocr run` keep a server with C slots and latency L full?

Such a server completes at most C/L pages/s. The benchmark runs `vlmocr run --engine openai
--concurrency K` against vlmocr.testing.openai_server (its own process; C slots, each request
holding its slot L seconds, answer "static") for C = 8, 64, 256 and K = C and K = 1.25 × C,
each with adaptive concurrency (the default: resized from the server's /metrics queue gauges)
and with `--fixed-concurrency`, and reports pages/s ÷ (C/L). Goal: >= 0.95.

The pages are tiny (a born-digital page rendered at 128 px on its longest side, PNG) so that
rendering is not what limits the client at C = 256 (256 pages/s at L = 1 s): the raw
render+encode rate of these pages on the same worker pool is measured in the same script and
printed beside the ceiling. Page counts are C × waves (waves = seconds ÷ L) so each run takes
about --seconds; the steady-state rate is taken from pages.jsonl `finished_at` between the end of
the first wave (the C-th finished page) and the last page, and the end-to-end rate (startup
included) is reported too. Server occupancy (mean requests held ÷ C over the same window) comes
from the server's own request log.

    python benchmarks/bench_saturation.py                  # C = 8, 64, 256; L = 1 s; 3 rounds
    python benchmarks/bench_saturation.py --quick          # smoke run: C = 8, 32; L = 0.5 s; 1 round
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from feeding import Server, machine_line, med, raw_task, run_vlmocr, spread, time_pool, warm_pool, write_profile

A6 = (298.0, 420.0)  # points: a small page keeps rendering cheap


def make_tiny_pdf(path: Path, pages: int) -> None:
    """A born-digital PDF of `pages` small pages, each with a heading and a few lines."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A6, pageCompression=1)
    for i in range(pages):
        c.setFont("Helvetica-Bold", 14)
        c.drawString(24, A6[1] - 40, f"Page {i + 1}")
        c.setFont("Helvetica", 9)
        for k in range(6):
            c.drawString(24, A6[1] - 70 - 13 * k, f"line {k + 1} of a small test page for the saturation benchmark")
        c.showPage()
    c.save()


def supports(flag: str) -> bool:
    out = subprocess.run([sys.executable, "-m", "vlmocr", "run", "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "300"})
    return flag in out.stdout


def server_occupancy(server: Server, t_from: float, t_to: float, slots: int) -> float | None:
    """Mean requests in the server (waiting or held) over [t_from, t_to], divided by slots."""
    try:
        log = server.stats()["requests"]
    except Exception:
        return None
    if t_to <= t_from:
        return None
    held = 0.0
    for r in log:
        if r.get("seconds") is None:
            continue
        a, b = r["received_at"], r["received_at"] + r["seconds"]
        held += max(0.0, min(b, t_to) - max(a, t_from))
    return held / (t_to - t_from) / slots


def limits(conc: dict[str, Any] | None) -> str:
    """The in-flight limit the run used: adaptive runs resize it from the server's gauges."""
    if not conc:
        return "–"
    if "min" not in conc:
        return f"{conc.get('start')} ({'adaptive' if conc.get('adaptive') else 'fixed'})"
    return (f"{conc['min']}–{conc['max']} ({conc.get('final')}), "
            f"{'adaptive' if conc.get('adaptive') else 'fixed'}, {conc.get('changes', 0)} changes")


def reset(server: Server) -> None:
    import httpx2 as httpx

    httpx.post(f"{server.root}/_reset", timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cs", default="8,64,256", help="server slots C to test, e.g. 8,64,256")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds each request holds its slot (L)")
    ap.add_argument("--seconds", type=float, default=12.0, help="target run length: waves = seconds / L")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; every variant once per round")
    ap.add_argument("--workers", type=int, default=2, help="vlmocr --workers (render processes)")
    ap.add_argument("--longest-side", type=int, default=128, help="page image size (small: rendering is cheap)")
    ap.add_argument("--factors", default="1,1.25", help="concurrency = C × factor, e.g. 1,1.25")
    ap.add_argument("--modes", default="adaptive,fixed", help="adaptive and/or fixed concurrency")
    ap.add_argument("--alt", action="append", default=[], metavar="NAME=SRC",
                    help="also run `vlmocr run` from another source tree (its src/ dir), side by side: "
                         "an A/B test of a proposed change (repeatable)")
    ap.add_argument("--workdir", type=Path, help="keep runs here (default: a temporary directory)")
    ap.add_argument("--quick", action="store_true", help="smoke run: C = 8, 32; L = 0.5 s; 3 waves; 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.cs, args.latency, args.seconds, args.rounds, args.modes = "8,32", 0.5, 1.5, 1, "adaptive"
    cs = [int(c) for c in args.cs.split(",")]
    factors = [float(f) for f in args.factors.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    alts: list[tuple[str, Path | None]] = [("", None)] + [
        (a.split("=", 1)[0], Path(a.split("=", 1)[1]).resolve()) for a in args.alt]
    if "fixed" in modes and not supports("--fixed-concurrency"):
        print("# vlmocr run has no --fixed-concurrency: measuring its default only")
        modes = ["default"]
    L = args.latency
    waves = max(3, round(args.seconds / L))

    tmp = None
    if args.workdir:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_saturation_")
        workdir = Path(tmp.name)
    profile = write_profile(workdir / "bench-saturation.toml", longest_side=args.longest_side,
                            name="bench-saturation", front_matter=False)
    pdfs = {}
    for c in cs:
        pdfs[c] = workdir / f"tiny-{c * waves}.pdf"
        make_tiny_pdf(pdfs[c], c * waves)

    print(f"# bench_saturation: C = {cs}, L = {L} s, {waves} waves of C pages per run, pages "
          f"{args.longest_side} px PNG (born-digital A6), --workers {args.workers}, {args.rounds} round(s)")
    print(f"# {machine_line()}")

    # The render ceiling for these pages on the same number of workers.
    pool = warm_pool(args.workers, pdfs[cs[0]], args.longest_side)
    probe = list(range(1, min(c * waves for c in cs) + 1))

    results: dict[tuple[int, float, str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    render_rates: list[float] = []
    servers = {}
    try:
        for c in cs:
            servers[c] = Server(workdir, slots=c, latency=L)
        for rnd in range(args.rounds):
            render_rates.append(time_pool(pool, raw_task, pdfs[cs[0]], probe, args.longest_side))
            for c in (cs if rnd % 2 == 0 else list(reversed(cs))):
                server = servers[c]
                for factor in factors:
                    k = max(1, math.ceil(c * factor))
                    for mode, (alt_name, alt_src) in [(m, a) for m in modes for a in alts]:
                        reset(server)
                        out = workdir / f"run-c{c}-k{k}-{mode}{'-' + alt_name if alt_name else ''}-r{rnd}"
                        shutil.rmtree(out, ignore_errors=True)
                        extra = ["--fixed-concurrency"] if mode == "fixed" else \
                            ["--adaptive"] if mode == "adaptive" else []
                        s0 = server.cpu()
                        res = run_vlmocr(pdfs[c], out, endpoint=server.url, profile=profile, workers=args.workers,
                                         concurrency=k, extra=extra, steady_skip=c, src=alt_src)
                        res["server_cpu"] = server.cpu() - s0
                        n = c * waves
                        if res["rc"] != 0 or res["pages"] != n:
                            print(f"!! C={c} K={k} {mode} {alt_name}: exit {res['rc']}, {res['pages']}/{n} records; "
                                  f"log {res['log']}:\n{res['log'].read_text()[-1500:]}")
                        ts = res["ts"]
                        res["occupancy"] = server_occupancy(server, ts[c - 1], ts[-1], c) if len(ts) > c else None
                        secs = sorted(r.get("seconds") or 0.0 for r in res["records"])
                        res["page_seconds_p50"] = secs[len(secs) // 2] if secs else None
                        res["concurrency"] = (res.get("reader") or {}).get("concurrency")
                        res.pop("records")
                        results[(c, factor, mode, alt_name)].append(res)
                        shutil.rmtree(out, ignore_errors=True)
            print(f"# round {rnd + 1}/{args.rounds} done", flush=True)
    finally:
        pool.shutdown()
        for s in servers.values():
            s.close()

    render = med(render_rates)
    print(f"\nraw render+encode of these pages, pool ×{args.workers}: {render:.0f} pages/s "
          f"({spread(render_rates)}); the largest ceiling C/L is {max(cs) / L:.0f} pages/s")
    print("\n| C | L s | K (concurrency) | mode | pages | ceiling C/L | steady pages/s | steady ÷ C/L "
          "| end-to-end pages/s | e2e ÷ C/L | server occupancy | page s p50 | main ms/page | workers ms/page "
          "| server ms/page | machine busy | limit min–max (final), last round |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    verdicts = []
    for (c, factor, mode_only, alt_name), rs in results.items():
        mode = f"{mode_only} [{alt_name}]" if alt_name else mode_only
        k = max(1, math.ceil(c * factor))
        ceiling = c / L
        n = max(1, rs[0]["pages"])
        steady = [r["steady"] for r in rs]
        ratio = [s / ceiling for s in steady if s]
        e2e = [r["rate"] / ceiling for r in rs]
        occ = [r["occupancy"] for r in rs if r["occupancy"] is not None]
        print(f"| {c} | {L:g} | {k} | {mode} | {n} | {ceiling:.0f} | {med(steady):.1f} | {med(ratio):.3f} ({spread(ratio)}) "
              f"| {med([r['rate'] for r in rs]):.1f} | {med(e2e):.3f} | {med(occ):.3f} "
              f"| {med([r['page_seconds_p50'] for r in rs]):.2f} "
              f"| {med([r['cpu']['main'] / n * 1e3 for r in rs]):.2f} "
              f"| {med([r['cpu']['workers'] / n * 1e3 for r in rs]):.2f} "
              f"| {med([r['server_cpu'] / n * 1e3 for r in rs]):.2f} "
              f"| {med([r['machine_busy'] for r in rs]):.2f} | {limits(rs[-1].get('concurrency'))} |")
        verdicts.append((c, k, mode, med(ratio), med(e2e)))
    print()
    for c, k, mode, ratio, e2e in verdicts:
        print(f"RESULT saturation C={c} L={L:g} K={k} {mode}: steady {ratio:.3f} of C/L "
              f"({'meets' if ratio >= 0.95 else 'MISSES'} 0.95); end to end {e2e:.3f}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

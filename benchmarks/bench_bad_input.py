"""Bad input: a corpus of hostile documents through `vlmocr run`; every case must end with a clear
record (bad_input naming its reason, or ok — flagged `downscaled` where the page was too big) and
the run must complete with the right exit code (1: bad_input pages are failures). Then memory and
speed on a 5 000-page PDF against a 50-page one (issue 10, figure 6).

    python benchmarks/bench_bad_input.py            # the corpus with --engine textlayer, the
                                                    # huge pages with --engine rapidocr --dpi 50,
                                                    # and the 5 000 vs 50 pages comparison
    python benchmarks/bench_bad_input.py --quick    # 500 vs 50 pages, a 12 000 px PNG
    python benchmarks/bench_bad_input.py --hostile-only [--before SRC]
                                                    # only the hostile files (below); --before
                                                    # also decodes them with another tree's src/

Hostile files (tiny on disk, made by vlmocr.testing.hostile_files): a TIFF whose second frame
claims 28000² RGB px, one whose second frame claims 60000², a 0.001 × 14400 pt PDF page, a PDF
whose page tree claims 1,000,000 pages, a 20000² RGB JPEG and two 20000² RGB TIFFs (400 MP each,
at the cap) read by two workers at once, each folder alone through `vlmocr run --engine rapidocr
--workers 2`; then each file decoded alone (render_page, one process, VmHWM), and every page
of a 10,000-frame TIFF rendered in order.

The cases: corrupt PDF, truncated PDF, encrypted PDF, zero-page PDF, a 200×200-inch PDF page, a
30 000×30 000 PNG (over the 400 MP hard limit) and a 20 000×20 000 one (at it), hostile file
names (spaces, quotes, `$(…)`, backticks, newline, non-ASCII, a 250-byte name), a symlink loop
and a self-referencing symlink, a dangling symlink, a truncated JPEG, and the big PDF.

Peak RSS: the sum of RSS over the run's process tree, sampled every 50 ms, plus ru_maxrss of
the run's process tree (largest single process) from wait4. Prints Markdown tables and RESULT
lines; exits 1 when a case misbehaves.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from measure import run_vlmocr

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------


def text_pdf(path: Path, pages: int, size: tuple[float, float] = (595, 842), label: str = "page") -> Path:
    """A born-digital PDF: one short text line per page (cheap to make and to read)."""
    from reportlab.pdfgen.canvas import Canvas

    c = Canvas(str(path), pagesize=size, invariant=1)
    for n in range(1, pages + 1):
        c.setFont("Helvetica", 12)
        c.drawString(72, size[1] - 72, f"This is {label} {n} of {pages}, a short line of real text.")
        c.showPage()
    c.save()
    return path


def png_white(path: Path, width: int, height: int) -> Path:
    """A white 8-bit gray PNG written row by row (Pillow would need width×height bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    comp = zlib.compressobj(1)
    row = b"\0" + b"\xff" * width
    parts = []
    for _ in range(height):
        parts.append(comp.compress(row))
    parts.append(comp.flush())
    with path.open("wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)))
        fh.write(chunk(b"IDAT", b"".join(parts)))
        fh.write(chunk(b"IEND", b""))
    return path


HOSTILE_NAMES = [
    "with  spaces .pdf",
    "quotes ' and \" .pdf",
    "$(touch PWNED-dollar).pdf",
    "`touch PWNED-backtick`.pdf",
    "new\nline.pdf",
    "ünïcødé 文書 – ëxtra.pdf",
    "a" * 246 + ".pdf",  # 250 bytes: over the 180-byte doc-id limit, under NAME_MAX
    "-starts-with-dash.pdf",
    ";rm -rf nothing;.pdf",
]


def make_corpus(folder: Path, huge_png: int) -> dict[str, dict[str, Any]]:
    """Write the cases; returns {relative path: {"expect": status set, "why": …}}."""
    import pypdfium2 as pdfium
    from PIL import Image
    from reportlab.pdfgen.canvas import Canvas

    folder.mkdir(parents=True)
    cases: dict[str, dict[str, Any]] = {}
    good = text_pdf(folder / "good.pdf", 2)
    cases["good.pdf"] = {"expect": {"ok"}, "what": "control: a 2-page text PDF"}

    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4096))
    cases["corrupt.pdf"] = {"expect": {"bad_input"}, "what": "corrupt PDF (header + random bytes)"}

    data = good.read_bytes()
    (folder / "truncated.pdf").write_bytes(data[: len(data) // 2])
    cases["truncated.pdf"] = {"expect": {"bad_input", "ok"}, "what": "PDF cut in half"}

    c = Canvas(str(folder / "encrypted.pdf"), encrypt="secret-password")
    c.drawString(72, 720, "secret")
    c.showPage()
    c.save()
    cases["encrypted.pdf"] = {"expect": {"bad_input"}, "what": "encrypted PDF (user password)"}

    empty = pdfium.PdfDocument.new()
    empty.save(str(folder / "zero-pages.pdf"))
    empty.close()
    cases["zero-pages.pdf"] = {"expect": {"bad_input"}, "what": "zero-page PDF"}

    text_pdf(folder / "huge-page.pdf", 1, size=(200 * 72, 200 * 72), label="huge page")
    cases["huge-page.pdf"] = {"expect": {"ok"}, "what": "PDF page of 200×200 inches", "huge": True}

    png_white(folder / "huge-30000.png", 30_000, 30_000)
    cases["huge-30000.png"] = {"expect": {"bad_input"}, "what": "30 000×30 000 PNG (900 MP)", "huge": True}
    png_white(folder / f"huge-{huge_png}.png", huge_png, huge_png)
    cases[f"huge-{huge_png}.png"] = {
        "expect": {"ok", "empty", "bad_input"},
        "what": f"{huge_png:,}×{huge_png:,} PNG ({huge_png * huge_png / 1e6:.0f} MP)",
        "huge": True,
    }

    buf = io.BytesIO()
    Image.new("RGB", (800, 600), "white").save(buf, "JPEG", quality=90)
    (folder / "cut-jpeg.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    # The text layer engine never decodes an image (empty, no_text_layer); an OCR engine must
    # say bad_input.
    cases["cut-jpeg.jpg"] = {"expect": {"bad_input", "empty"}, "ocr_expect": {"bad_input"},
                             "what": "JPEG cut in half", "huge": True}

    (folder / "not-a-pdf.pdf").write_text("just text, no PDF at all\n")
    cases["not-a-pdf.pdf"] = {"expect": {"bad_input"}, "what": "text file named .pdf"}

    (folder / "empty-file.pdf").write_bytes(b"")
    cases["empty-file.pdf"] = {"expect": {"bad_input"}, "what": "0-byte .pdf"}

    names = folder / "names"
    names.mkdir()
    for name in HOSTILE_NAMES:
        shutil.copyfile(good, names / name)
        cases[f"names/{name}"] = {"expect": {"ok"}, "what": f"hostile name {name!r}"[:60]}

    loops = folder / "loops"
    loops.mkdir()
    shutil.copyfile(good, loops / "inside.pdf")
    cases["loops/inside.pdf"] = {"expect": {"ok"}, "what": "a file next to the symlink loops"}
    os.symlink("..", loops / "up")  # loops/up/loops/up/… : a directory loop
    os.symlink("self.pdf", loops / "self.pdf")  # a link to itself (ELOOP)
    cases["loops/self.pdf"] = {"expect": {"bad_input", None}, "what": "symlink to itself"}
    os.symlink("nowhere.pdf", loops / "dangling.pdf")
    cases["loops/dangling.pdf"] = {"expect": {"bad_input"}, "what": "dangling symlink"}
    return cases


# ---------------------------------------------------------------------------------------------
# Judging the records
# ---------------------------------------------------------------------------------------------


def read_records(run: Path) -> list[dict[str, Any]]:
    path = run / "pages.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def judge(cases: dict[str, dict[str, Any]], corpus: Path, run: Path, only_huge: bool = False) -> list[dict[str, Any]]:
    recs = read_records(run)
    by_source: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        src = os.path.relpath(r["source"], corpus) if os.path.isabs(r["source"]) else r["source"]
        if src.startswith(str(corpus)):
            src = src[len(str(corpus)) + 1:]
        by_source.setdefault(os.path.normpath(src), []).append(r)
    rows = []
    for rel, case in cases.items():
        if only_huge and not case.get("huge"):
            continue
        rs = by_source.get(os.path.normpath(rel), [])
        statuses = sorted({r["status"] for r in rs})
        flags = sorted({f for r in rs for f in (r.get("flags") or [])})
        reasons = sorted({(r.get("error") or "")[:110] for r in rs if r.get("error")})
        allowed = case.get("ocr_expect", case["expect"]) if only_huge else case["expect"]
        fine = (not rs and None in allowed) or (bool(rs) and set(statuses) <= allowed)
        if rs and "bad_input" in statuses and not reasons:
            fine = False  # a bad_input record must say why
        rows.append({
            "case": rel, "what": case["what"], "records": len(rs), "pages": sorted({r["page"] for r in rs})[:3],
            "statuses": statuses, "flags": flags, "reason": "; ".join(reasons),
            "size": sorted({f"{r.get('width')}x{r.get('height')}" for r in rs if r.get("width")}),
            "doc_ids": sorted({r["doc_id"] for r in rs}), "fine": fine,
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| case | records | status | flags | image px | reason / doc id | verdict |", "|---|---:|---|---|---|---|---|"]
    for r in rows:
        note = r["reason"] or ", ".join(repr(d)[:50] for d in r["doc_ids"])
        out.append(
            f"| {r['what'].replace('|', '/')} | {r['records']} | {', '.join(r['statuses']) or '—'} | "
            f"{', '.join(r['flags'])} | {', '.join(r['size'])} | {note.replace('|', '/')} | "
            f"{'ok' if r['fine'] else '**MISBEHAVES**'} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Hostile files
# ---------------------------------------------------------------------------------------------


def make_hostile(folder: Path, quick: bool) -> dict[str, dict[str, Any]]:
    """One folder per case; {case: {"dir", "what", "expect": {page: status}, "reason": {page: text}}}."""
    from PIL import Image

    from vlmocr.testing.hostile_files import write_pdf, write_tiff

    big = 8000 if quick else 20_000
    cases: dict[str, dict[str, Any]] = {}

    def case(name: str, what: str, expect: dict[int, str], reason: dict[int, str] | None = None) -> Path:
        d = folder / name
        d.mkdir(parents=True)
        cases[name] = {"dir": d, "what": what, "expect": expect, "reason": reason or {}}
        return d

    d = case("tiff-28000", "TIFF, frame 2 claims 28000² RGB", {1: "ok", 2: "bad_input"},
             {2: "exceeds the 400 MP limit"})
    write_tiff(d / "second.tif", [(1700, 2200), (28000, 28000)], samples=3)
    d = case("tiff-60000", "TIFF, frame 2 claims 60000² grey", {1: "ok", 2: "bad_input"},
             {2: "exceeds the 400 MP limit"})
    write_tiff(d / "second.tif", [(1700, 2200), (60000, 60000)])
    d = case("sliver", "PDF page 0.001 × 14400 pt", {1: "bad_input"}, {1: "too thin to read"})
    write_pdf(d / "sliver.pdf", [(0.001, 14400)])
    d = case("million", "PDF claiming 1,000,000 pages", {0: "bad_input"}, {0: "claims 1,000,000 pages"})
    write_pdf(d / "million.pdf", [(595, 842)], claimed_pages=1_000_000)
    d = case("jpeg-big", f"{big:,}² RGB JPEG ({big * big / 1e6:.0f} MP)", {1: "ok"})
    img = Image.new("RGB", (big, big), (250, 248, 240))
    img.save(d / "big.jpg", quality=85)
    del img
    d = case("tiff-big-x2", f"two {big:,}² RGB TIFFs, 2 workers", {1: "ok"})
    write_tiff(d / "a.tif", [(big, big)], samples=3)
    write_tiff(d / "b.tif", [(big, big)], samples=3, value=254)
    return cases


# VmHWM (this process's peak resident memory): ru_maxrss would start at the parent's peak.
DECODE_PROBE = """
import json, sys, time
from pathlib import Path
from vlmocr.exceptions import BadInput
from vlmocr.inputs.render import Sizing, render_page
mb = lambda: int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
base, t = mb(), time.monotonic()
try:
    r = render_page(Path(sys.argv[1]), int(sys.argv[2]), Sizing())
    out = f"{r.image.width}x{r.image.height} {' '.join(r.flags)}".strip()
except BadInput as exc:
    out = "bad_input: " + exc.reason
except BaseException as exc:
    out = f"error: {type(exc).__name__}: {exc}"[:120]
print(json.dumps({"base_mb": base, "peak_mb": mb(), "seconds": time.monotonic() - t, "outcome": out}))
"""

FRAMES_PROBE = """
import json, sys, time
from pathlib import Path
from vlmocr.inputs.render import Sizing, count_pages, render_page
path, pages = Path(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")]
t = time.monotonic()
n = count_pages(path)
count_s = time.monotonic() - t
t = time.monotonic()
for p in pages:
    render_page(path, p, Sizing())
print(json.dumps({"frames": n, "count_s": count_s, "render_s": time.monotonic() - t, "pages": len(pages)}))
"""


def _probe(src: Path, script: str, *args: str, timeout: float = 7200) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    if proc.returncode != 0:
        return {"outcome": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    return json.loads(proc.stdout)


def hostile_section(work: Path, quick: bool, before: Path | None) -> bool:
    """Returns True when a case misbehaves."""
    from vlmocr.testing.hostile_files import write_tiff

    bad = False
    cases = make_hostile(work / "hostile", quick)
    print("\n## hostile files: `vlmocr run CASE --engine rapidocr --workers 2`\n")
    print("| case | on disk | exit | wall s | peak tree RSS MB | records: page status (reason) | verdict |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, case in cases.items():
        run = work / f"run-{name}"
        size = sum(f.stat().st_size for f in case["dir"].iterdir())
        res = run_vlmocr([str(case["dir"]), "--out", str(run), "--engine", "rapidocr", "--workers", "2"])
        recs = read_records(run)
        fine = bool(recs)
        shown = []
        for r in sorted(recs, key=lambda r: (r["doc_id"], r["page"])):
            want = case["expect"].get(r["page"])
            fine &= want is not None and r["status"] == want
            why = case["reason"].get(r["page"])
            fine &= why is None or why in (r.get("error") or "")
            note = (r.get("error") or ", ".join(r.get("flags") or [])).replace("|", "/")[:90]
            shown.append(f"{r['doc_id']} p{r['page']} {r['status']}" + (f" ({note})" if note else ""))
        bad |= not fine
        print(f"| {case['what']} | {size / 1024:,.0f} KB | {res['rc']} | {res['wall_s']:.1f} | "
              f"{res['peak_tree_rss_mb']:,.0f} | {'; '.join(shown)} | {'ok' if fine else '**MISBEHAVES**'} |")
        print(f"RESULT hostile {name}: exit {res['rc']}, peak tree RSS {res['peak_tree_rss_mb']:.0f} MB, "
              f"{res['wall_s']:.1f} s", file=sys.stderr)

    trees = [("this tree", ROOT / "src")] + ([("before", before)] if before else [])
    decodes = [("tiff-28000", "second.tif", 2), ("tiff-60000", "second.tif", 2), ("sliver", "sliver.pdf", 1),
               ("jpeg-big", "big.jpg", 1), ("tiff-big-x2", "a.tif", 1)]
    print("\n## hostile files decoded alone: render_page in one process (peak RSS, VmHWM)\n")
    print("| file | tree | peak RSS MB (imports) | s | outcome |")
    print("|---|---|---:|---:|---|")
    for name, file, page in decodes:
        for label, src in trees:
            if label == "before" and name == "tiff-28000":
                continue  # 9 GB in the issue's measurement: not on a shared machine
            r = _probe(src, DECODE_PROBE, str(cases[name]["dir"] / file), str(page))
            print(f"| {cases[name]['what']} p{page} | {label} | {r.get('peak_mb', 0):,.0f} "
                  f"({r.get('base_mb', 0):,.0f}) | {r.get('seconds', 0):.1f} | {r['outcome'][:100]} |")

    frames = 2000 if quick else 10_000
    tif = write_tiff(work / "hostile" / "frames.tif", [(64, 64)] * frames)
    print(f"\n## a {frames:,}-frame TIFF (64² px frames, {tif.stat().st_size / 1e6:.1f} MB): render_page on pages in order\n")
    print("| tree | frames counted in s | pages rendered | s | ms per page |")
    print("|---|---:|---:|---:|---:|")
    for label, src in trees:
        if label == "before":  # quadratic: time the last 20 pages only
            pages = list(range(frames - 19, frames + 1))
        else:
            pages = list(range(1, frames + 1))
        r = _probe(src, FRAMES_PROBE, str(tif), ",".join(map(str, pages)))
        if "render_s" not in r:
            print(f"| {label} | | | | {r.get('outcome')} |")
            bad = True
            continue
        print(f"| {label} | {r['count_s']:.1f} | {'all ' if len(pages) == frames else 'last '}{len(pages):,} | "
              f"{r['render_s']:.1f} | {1000 * r['render_s'] / len(pages):.1f} |")
        print(f"RESULT frames {label}: {1000 * r['render_s'] / len(pages):.1f} ms/page over "
              f"{len(pages)} pages of {frames}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big-pages", type=int, default=5000)
    ap.add_argument("--small-pages", type=int, default=50)
    ap.add_argument("--huge-png", type=int, default=20_000)
    ap.add_argument("--no-rapidocr", action="store_true", help="skip the huge pages with rapidocr")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--hostile-only", action="store_true", help="only the hostile files section")
    ap.add_argument("--before", type=Path, help="another tree's src/ to decode the hostile files with too")
    args = ap.parse_args(argv)
    if args.quick:
        args.big_pages, args.huge_png = 500, 12_000
    tmp = None
    if args.workdir:
        work = args.workdir
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        tmp = tempfile.mkdtemp(prefix="vlmocr-bad-")
        work = Path(tmp)
    bad = False
    try:
        if args.hostile_only:
            return 1 if hostile_section(work, args.quick, args.before) else 0
        t0 = time.monotonic()
        corpus = work / "corpus"
        cases = make_corpus(corpus, args.huge_png)
        print(f"corpus: {len(cases)} cases in {time.monotonic() - t0:.1f} s", file=sys.stderr)

        # 1. The whole corpus with the text layer engine; then again (resume must be stable).
        run = work / "run-textlayer"
        res = run_vlmocr([str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "2"])
        rows = judge(cases, corpus, run)
        print("## textlayer\n")
        print(f"exit {res['rc']}, {res['wall_s']:.1f} s, peak tree RSS {res['peak_tree_rss_mb']:.0f} MB\n")
        print("`" + res["stdout"].strip().splitlines()[-1] + "`\n" if res["stdout"].strip() else "(no stdout)\n")
        print(table(rows))
        if res["rc"] != 1:
            bad = True
            print(f"MISBEHAVES exit code {res['rc']} (expected 1: bad_input pages are failures)\n{res['stderr'][-2000:]}")
        again = run_vlmocr([str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "2"])
        n_before = len(rows) and sum(r["records"] for r in rows)
        n_after = sum(r["records"] for r in judge(cases, corpus, run))
        print(f"\nRESULT rerun: exit {again['rc']}, records {n_before} → {n_after}, {again['wall_s']:.1f} s")
        pwned = [*Path.cwd().glob("PWNED*"), *work.rglob("PWNED*")]
        print(f"RESULT hostile names: files named PWNED* created: {len(pwned)}")
        bad |= bool(pwned) or again["rc"] != res["rc"] or n_after != n_before
        misbehaving = [r for r in rows if not r["fine"]]
        bad |= bool(misbehaving)
        print(f"RESULT textlayer corpus: {len(rows)} cases, {len(rows) - len(misbehaving)} with a clear record, "
              f"exit {res['rc']}, peak tree RSS {res['peak_tree_rss_mb']:.0f} MB")

        # 2. The huge pages with rapidocr at 50 dpi.
        if not args.no_rapidocr:
            huge = work / "huge"
            huge.mkdir()
            for rel, case in cases.items():
                if case.get("huge"):
                    os.link(corpus / rel, huge / rel)
            run2 = work / "run-rapidocr"
            res2 = run_vlmocr([str(huge), "--out", str(run2), "--engine", "rapidocr", "--dpi", "50", "--workers", "2"])
            rows2 = judge({k: v for k, v in cases.items() if v.get("huge")}, huge, run2, only_huge=True)
            print("\n## rapidocr --dpi 50, huge pages only\n")
            print(f"exit {res2['rc']}, {res2['wall_s']:.1f} s, peak tree RSS {res2['peak_tree_rss_mb']:.0f} MB, "
                  f"largest process {res2['maxrss_mb']:.0f} MB\n")
            print(table(rows2))
            bad |= any(not r["fine"] for r in rows2)
            print(f"RESULT rapidocr huge pages: exit {res2['rc']}, {res2['wall_s']:.1f} s, peak tree RSS "
                  f"{res2['peak_tree_rss_mb']:.0f} MB; flags {[r['flags'] for r in rows2]}")

        # 3. Memory and speed: the big PDF alone against a small one (same pages).
        mem_rows = []
        for pages in (args.small_pages, args.big_pages):
            folder = work / f"pdf{pages}"
            folder.mkdir()
            t = time.monotonic()
            text_pdf(folder / f"p{pages}.pdf", pages)
            gen = time.monotonic() - t
            r = run_vlmocr([str(folder), "--out", str(work / f"run{pages}"), "--engine", "textlayer", "--workers", "2"])
            recs = read_records(work / f"run{pages}")
            okn = sum(1 for x in recs if x["status"] == "ok")
            mem_rows.append((pages, gen, r, okn))
        print("\n## memory and speed, textlayer, one PDF\n")
        print("| PDF pages | generate s | exit | records ok | wall s | pages/s | peak tree RSS MB | largest process MB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for pages, gen, r, okn in mem_rows:
            print(f"| {pages} | {gen:.1f} | {r['rc']} | {okn} | {r['wall_s']:.1f} | {pages / r['wall_s']:.0f} | "
                  f"{r['peak_tree_rss_mb']:.0f} | {r['maxrss_mb']:.0f} |")
        (sp, _, sr, sok), (bp, _, br, bok) = mem_rows
        ratio = br["peak_tree_rss_mb"] / sr["peak_tree_rss_mb"]
        ratio_max = br["maxrss_mb"] / sr["maxrss_mb"]
        print(f"\nRESULT memory: {bp}-page PDF peak tree RSS {br['peak_tree_rss_mb']:.0f} MB vs {sp}-page "
              f"{sr['peak_tree_rss_mb']:.0f} MB: ×{ratio:.2f} (largest process ×{ratio_max:.2f}) "
              f"for ×{bp / sp:.0f} pages")
        marginal = (bp - sp) / max(br["wall_s"] - sr["wall_s"], 1e-3)
        print(f"RESULT speed: {bp}-page PDF {bp / br['wall_s']:.0f} pages/s wall incl. start-up "
              f"({sp}-page {sp / sr['wall_s']:.0f} pages/s); marginal {marginal:.0f} pages/s "
              f"(extra pages / extra seconds)")
        bad |= bok != bp or sok != sp or br["rc"] != 0 or sr["rc"] != 0
        bad |= hostile_section(work, args.quick, args.before)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

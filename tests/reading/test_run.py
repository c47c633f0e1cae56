"""End to end through the real `vlmocr` command, real PDFs and images, real OCR engines."""

from __future__ import annotations

import json
from collections import Counter

import pypdfium2 as pdfium
import pytest

from support.cli import run_cli
from support.components import REPO
from support.documents import make_scan_pdf, make_text_pdf, page_lines, text_image
from support.records import finals, read_records
from vlmocr.evaluation import cer

SAMPLES = REPO / "samples"


def test_samples_end_to_end_then_nothing_to_do(tmp_path):
    run = tmp_path / "run"
    # RapidOCR, as on a fresh machine (the quick start: no Tesseract yet, so `auto` takes it):
    # the samples are small scans (150 dpi) whose line starts Tesseract loses (20-26 % CER on
    # report-da and typescript-fr; tests/engines/test_choice.py covers `auto` with Tesseract).
    # The default path: auto reads the scans of these Latin-script samples with RapidOCR.
    res = run_cli("run", str(SAMPLES), "--out", str(run), "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Done: 7 pages in 4 docs, records=7 ok=7 fallback=0 review=0 failed=0 missing=0")
    recs = finals(run)
    assert sorted(recs) == [("born-digital", 1), ("born-digital", 2), ("report-da", 1), ("report-da", 2),
                            ("scanned-typewritten", 1), ("scanned-typewritten", 2), ("typescript-fr", 1)]
    assert {r["engine"] for (d, _), r in recs.items() if d == "born-digital"} == {"textlayer"}
    assert {r["engine"] for (d, _), r in recs.items() if d != "born-digital"} == {"rapidocr"}
    for r in recs.values():
        assert r["status"] == "ok" and r["key"] and r["finished_at"] and r["attempt"] == 1
        if r["engine"] == "rapidocr":
            assert len(r["image_sha256"]) == 64 and r["width"] > 0
            assert r["dpi"] or r["doc_id"] == "typescript-fr"  # a PNG without DPI metadata
    # The assembled documents carry page markers and the text.
    md = (run / "docs" / "scanned-typewritten.md").read_text(encoding="utf-8")
    assert md.startswith("<!-- page 1 | ok | rapidocr -->") and "<!-- page 2 | ok | rapidocr -->" in md
    # Quality: exact from the text layer, close from RapidOCR on typewritten scans.
    def doc_text(doc):
        return "\n".join(recs[k]["text"] for k in sorted(k for k in recs if k[0] == doc))
    assert cer(doc_text("born-digital"), (SAMPLES / "born-digital.txt").read_text()) == 0
    assert cer(doc_text("scanned-typewritten"), (SAMPLES / "scanned-typewritten.txt").read_text()) < 0.10
    # The README's figure for the samples is this run's (issue 26: it once promised 13.1 %).
    ev = run_cli("evaluate", str(run), "--truth", str(SAMPLES), "--json")
    corpus_cer = json.loads(ev.stdout)["corpus"]["cer"]
    assert f"scores all 7 pages ({corpus_cer * 100:.2f} % CER, micro" in (REPO / "README.md").read_text().replace("\n", " ")
    info = json.loads((run / "run.json").read_text())
    assert info["key"] == recs[("born-digital", 1)]["key"]
    assert info["versions"]["pypdfium2"] and info["versions"]["rapidocr"]
    assert info["summary"]["ok"] == 7 and info["summary"]["exit_code"] == 0
    lines_before = (run / "pages.jsonl").read_text()
    # Not named again: the run goes on with the engine it started with (engines/choice.py).
    again = run_cli("run", str(SAMPLES), "--out", str(run))
    assert again.returncode == 0
    assert "Nothing to do" in again.stderr and "rapidocr (reads Latn script better" in again.stderr
    assert (run / "pages.jsonl").read_text() == lines_before


def test_textlayer_is_exact(tmp_path):
    pages = [["Ground truth written into the PDF, line one.", "Zweite Zeile: Übergrößenträger."],
             ["Page two — with an em dash and «guillemets».", "Ærø, façade, naïve; Škoda needs no Greek."]]
    pdf = make_text_pdf(tmp_path / "digital.pdf", pages)
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--engine", "textlayer")
    assert res.returncode == 0, res.stderr
    recs = finals(tmp_path / "r")
    for i, lines in enumerate(pages, 1):
        assert cer(recs[("digital", i)]["text"], "\n".join(lines)) == 0


@pytest.mark.tesseract
def test_tesseract_reads_a_real_typewritten_page(tmp_path, gt, tesseract):
    page = gt / "ehri_en" / "EHRI-DR-19390519-US_03.jpg"
    res = run_cli("run", str(page), "--out", str(tmp_path / "r"), "--engine", "tesseract", "--lang", "eng")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["engine"] == "tesseract" and rec["model"] == "tesseract:eng"
    assert cer(rec["text"], page.with_suffix(".txt").read_text(encoding="utf-8")) < 0.08
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["versions"]["tesseract"].startswith("tesseract")


def test_missing_tesseract_language_is_a_usage_error(tmp_path, tesseract):
    pdf = make_scan_pdf(tmp_path / "s.pdf", [page_lines(1, 1)])
    # A language Tesseract has data for, not installed here: the package to install is named.
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--engine", "tesseract", "--lang", "kor")
    assert res.returncode == 3 and "no language data for kor" in res.stderr and "tesseract-ocr-kor" in res.stderr
    # A name that is no language at all: refused as such (issue 47, point 3).
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--engine", "tesseract", "--lang", "xxx")
    assert res.returncode == 3 and "'xxx'" in res.stderr and "no Tesseract language" in res.stderr


def test_resume_rereads_on_changed_dpi_not_on_changed_workers(tmp_path):
    pdf = make_scan_pdf(tmp_path / "scan.pdf", [page_lines(1, 1), page_lines(1, 2)])
    run = tmp_path / "r"
    assert run_cli("run", str(pdf), "--out", str(run), "--dpi", "100", "--workers", "2").returncode == 0
    first = read_records(run)
    assert len(first) == 2 and "page 2" in first[1]["text"] + first[0]["text"]
    assert run_cli("run", str(pdf), "--out", str(run), "--dpi", "100", "--workers", "1").returncode == 0
    assert len(read_records(run)) == 2
    # Another dpi is another reading: the folder holds one (issue 27), so it is said, then asked for.
    refused = run_cli("run", str(pdf), "--out", str(run), "--dpi", "120")
    assert refused.returncode == 3 and "--reread" in refused.stderr and "dpi 120" in refused.stderr
    assert len(read_records(run)) == 2
    assert run_cli("run", str(pdf), "--out", str(run), "--dpi", "120", "--reread").returncode == 0
    recs = read_records(run)
    assert len(recs) == 4 and recs[2]["key"] != recs[0]["key"] and recs[2]["dpi"] == 120
    # --force re-reads under the same key, continuing the attempt count.
    assert run_cli("run", str(pdf), "--out", str(run), "--dpi", "120", "--force").returncode == 0
    recs = read_records(run)
    assert len(recs) == 6 and {r["attempt"] for r in recs[4:]} == {2}
    md = (run / "docs" / "scan.md").read_text()
    assert md.count("<!-- page ") == 2


def test_shards_union_is_the_whole_without_overlap(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for d in range(9):
        make_text_pdf(corpus / f"doc{d}.pdf", [[f"Document {d} page {p} " * 4] for p in range(1, 3)])
    whole = tmp_path / "whole"
    assert run_cli("run", str(corpus), "--out", str(whole), "--workers", "1").returncode == 0
    seen: Counter = Counter()
    for k in (1, 2, 3):
        out = tmp_path / f"shard{k}"
        res = run_cli("run", str(corpus), "--out", str(out), "--shard", f"{k}/3", "--workers", "1")
        assert res.returncode == 0, res.stderr
        seen.update(finals(out).keys())
    assert set(seen) == set(finals(whole)) and len(seen) == 18
    assert max(seen.values()) == 1


def test_bad_input_corpus_gets_records_and_the_run_goes_on(tmp_path):
    from reportlab.pdfgen import canvas

    c = tmp_path / "corpus"
    c.mkdir()
    make_text_pdf(c / "good.pdf", [["A good born-digital page with enough characters to count."]])
    (c / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage")
    enc = canvas.Canvas(str(c / "encrypted.pdf"), encrypt="pw")
    enc.drawString(72, 720, "secret")
    enc.showPage()
    enc.save()
    pdfium.PdfDocument.new().save(c / "zero.pdf")
    png = c / "truncated.png"
    text_image(["cut short"], (600, 600)).save(png)
    png.write_bytes(png.read_bytes()[:400])
    poster = canvas.Canvas(str(c / "poster.pdf"), pagesize=(4000, 5000))
    poster.drawString(100, 4800, "A poster far over the pixel cap, with a text layer on it, long enough.")
    poster.showPage()
    poster.save()
    weird = c / 'we ird, "quoted" ü\nname.png'
    text_image(["hostile file name"], (500, 300)).save(weird)
    (c / "notes.docx").write_bytes(b"PK\x03\x04")
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        "doc_id,path,pages\n"
        "missing,corpus/nowhere.pdf,\n"
        "docx,corpus/notes.docx,\n"
        "toofar,corpus/good.pdf,\"1,3\"\n",
        encoding="utf-8",
    )
    run = tmp_path / "r"
    res = run_cli("run", str(c), "--manifest", str(manifest), "--out", str(run), "--max-pixels", "2000000",
                  "--workers", "2", "--json")
    assert res.returncode == 9, res.stderr  # finished, some inputs unreadable
    summary = json.loads(res.stdout)
    recs = finals(run)
    reasons = {k[0]: r.get("error", "") for k, r in recs.items() if r["status"] == "bad_input"}
    assert "encrypted PDF" in reasons["encrypted"]
    assert "corrupt PDF" in reasons["corrupt"]
    assert "no pages" in reasons["zero"]
    assert "truncated or corrupt image" in reasons["truncated"] or "unreadable image" in reasons["truncated"]
    assert "file not found" in reasons["missing"]
    assert "unsupported file type '.docx'" in reasons["docx"]
    assert "page 3 does not exist" in recs[("toofar", 3)]["error"]
    assert recs[("good", 1)]["status"] == "ok" and recs[("toofar", 1)]["status"] == "ok"
    poster_rec = recs[("poster", 1)]
    assert poster_rec["status"] == "ok" and poster_rec["engine"] == "textlayer"
    weird_rec = recs[('we ird, "quoted" ü_name', 1)]
    assert weird_rec["status"] == "ok" and "hostile" in weird_rec["text"].lower()
    assert (run / "docs" / 'we ird, "quoted" ü_name.md').exists()
    assert summary["failed"] == 7 and summary["missing"] == 0 and summary["exit_code"] == 9
    # Failed documents are final: a rerun writes nothing new.
    n = len(read_records(run))
    assert run_cli("run", str(c), "--manifest", str(manifest), "--out", str(run), "--max-pixels", "2000000").returncode == 9
    assert len(read_records(run)) == n


def test_huge_scan_is_downscaled_and_flagged(tmp_path):
    img = text_image(["a large scan", "with several lines", "of text on it"], (3000, 4000), font_size=70)
    img.save(tmp_path / "big.png")
    run = tmp_path / "r"
    res = run_cli("run", str(tmp_path / "big.png"), "--out", str(run), "--max-pixels", "3000000")
    assert res.returncode == 0, res.stderr
    (rec,) = finals(run).values()
    assert "downscaled" in rec["flags"] and rec["width"] * rec["height"] <= 3_000_000 * 1.01
    assert "large scan" in rec["text"].lower()


def test_review_only_exits_2_and_usage_errors_exit_3(tmp_path):
    pdf = make_scan_pdf(tmp_path / "scan.pdf", [page_lines(1, 1)])
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--engine", "textlayer")
    assert res.returncode == 2, res.stdout + res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] == "empty" and "no_text_layer" in rec["flags"]
    assert "review=1" in res.stdout
    assert run_cli("run", str(pdf), "--out", str(tmp_path / "x"), "--no-such-flag").returncode == 3
    assert run_cli("run", str(pdf), "--out", str(tmp_path / "x"), "--dpi", "2").returncode == 3
    assert run_cli("run", str(pdf), str(pdf), "--out", str(tmp_path / "x")).returncode == 3  # duplicate id


def test_blank_page_is_ok_not_empty(tmp_path):
    from PIL import Image

    Image.new("L", (800, 1000), 255).save(tmp_path / "blank.png")
    res = run_cli("run", str(tmp_path / "blank.png"), "--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stdout + res.stderr
    (rec,) = finals(tmp_path / "r").values()
    assert rec["status"] == "ok" and "blank_page" in rec["flags"]


def test_config_file_and_environment_layers(tmp_path):
    pdf = make_text_pdf(tmp_path / "d.pdf", [["Configuration layering check with a long enough line."]])
    cfg = tmp_path / "c.toml"
    cfg.write_text('engine = "textlayer"\ndpi = 150\n', encoding="utf-8")
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--config", str(cfg), "--dpi", "110",
                  env={"VLMOCR_DPI": "90", "VLMOCR_WORKERS": "1"})
    assert res.returncode == 0, res.stderr
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["settings"]["engine"] == "textlayer" and info["settings"]["dpi"] == 110
    assert info["settings"]["workers"] == 1
    cfg.write_text('engin = "textlayer"\n', encoding="utf-8")
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r2"), "--config", str(cfg))
    assert res.returncode == 3 and "unknown setting(s) engin" in res.stderr


def test_a_long_tmpdir_does_not_stop_the_worker_pool(tmp_path):
    # Cluster jobs get per-job TMPDIRs deep enough to overflow a Unix socket path.
    deep = tmp_path / ("t" * 60) / ("m" * 60)
    deep.mkdir(parents=True)
    pdf = make_text_pdf(tmp_path / "d.pdf", [["A born-digital page, read in a pool under a deep TMPDIR."]])
    res = run_cli("run", str(pdf), "--out", str(tmp_path / "r"), "--workers", "2", env={"TMPDIR": str(deep)})
    assert res.returncode == 0, res.stderr
    (rec,) = read_records(tmp_path / "r")
    assert rec["status"] == "ok" and "under a deep TMPDIR" in rec["text"], rec


def test_a_finished_run_resumes_without_starting_a_worker(tmp_path):
    """Nothing left to do: the CPU reader's pool is never started (no forkserver, no workers:
    the resume stays at its ~0.4 s floor, BENCHMARKS.md "Resume")."""
    import asyncio

    from vlmocr.reading.scheduler import Scheduler, make_reader
    from vlmocr.settings.config import RunConfig

    src = tmp_path / "in"
    src.mkdir()
    make_text_pdf(src / "a.pdf", [["page one text"], ["page two text"]])
    cfg = RunConfig(inputs=[str(src)], out=tmp_path / "run", engine="textlayer", workers=2)
    started: list[int] = []  # worker processes alive when each run closed its reader

    async def factory(c):
        reader = await make_reader(c)
        close = reader.aclose

        async def aclose(**kw):
            started.append(len(reader.pool._pool._processes or {}))
            await close(**kw)

        reader.aclose = aclose
        return reader

    first = asyncio.run(Scheduler(cfg, reader_factory=factory).run())
    again = asyncio.run(Scheduler(cfg, reader_factory=factory).run())
    assert (first.read_now, again.read_now, again.ok) == (2, 0, 2)
    assert started[0] > 0 and started[1] == 0

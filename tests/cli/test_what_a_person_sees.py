"""What a person reads after a command tells the truth: no rate when nothing was read, no text
layer judged on a file that has none, no resolution shown as measured when it is a software
default. The real `vlmocr` command on real files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from PIL import Image

from support.cli import run_cli
from support.components import need
from support.documents import make_doc, make_scan_pdf, text_image


def test_nothing_to_do_shows_no_rate(tmp_path):
    doc = make_doc(tmp_path / "src", "a.pdf", 1, 2)
    args = ("run", str(doc), "--engine", "textlayer", "--workers", "1", "--out", str(tmp_path / "run"))
    first = run_cli(*args)
    assert first.returncode == 0 and first.stdout.rstrip().endswith("pages/h)"), first.stdout
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert "Nothing to do" in again.stderr
    assert again.stdout.strip() == "Done: 2 pages in 1 docs, records=2 ok=2 fallback=0 review=0 failed=0 missing=0"


def test_an_image_file_is_not_flagged_for_its_text_layer(tmp_path):
    """An image has no text layer: `textlayer_unusable:only 0 characters` on its pages (and in the
    report) said nothing. A scanned PDF's pages keep the flag: their layer was judged."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    src = tmp_path / "src"
    src.mkdir()
    lines = ["The harbour council met in winter.", "The ledger was kept by the teacher."]
    text_image(lines, size=(700, 400)).save(src / "photo.png")
    make_scan_pdf(src / "scan.pdf", [lines], size=(700, 400))
    out = tmp_path / "run"
    proc = run_cli("run", str(src), "--ocr-engine", "tesseract", "--workers", "1", "--out", str(out))
    assert proc.returncode in (0, 2), proc.stderr
    flags = {r["doc_id"]: r["flags"] for r in map(json.loads, (out / "pages.jsonl").read_text().splitlines())}
    assert not any(f.startswith("textlayer_unusable") for f in flags["photo"]), flags
    assert "textlayer_unusable:only 0 characters" in flags["scan"], flags


def test_triage_marks_a_software_default_resolution_as_assumed(tmp_path):
    """72 and 96 dpi are what image software writes when it knows no resolution: triage says
    `assumed` in dpi_source instead of showing them as measured; a scanner's 300 stays metadata,
    no resolution stays empty."""
    src = tmp_path / "src"
    src.mkdir()
    page = Image.new("L", (850, 1100), 255)
    page.save(src / "default96.jpg", dpi=(96, 96))
    page.save(src / "default72.png", dpi=(72, 72))
    page.save(src / "scanner300.jpg", dpi=(300, 300))
    page.save(src / "none.png")
    out = tmp_path / "triage.csv"
    proc = run_cli("triage", str(src), "--out", str(out), "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    rows = {r["doc_id"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    seen = {k: (r["scan_dpi"], r["dpi_source"]) for k, r in rows.items()}
    assert seen == {"default96": ("96", "assumed"), "default72": ("72", "assumed"),
                    "scanner300": ("300", "metadata"), "none": ("", "")}, seen


def test_triage_sheets_say_assumed_beside_a_default_resolution(tmp_path):
    """The contact sheet's caption is drawn text: the facts it is drawn from say assumed."""
    from vlmocr.corpus.facts import image_facts

    path = tmp_path / "p.jpg"
    Image.new("L", (850, 1100), 255).save(path, dpi=(96, 96))
    (facts,), dpi = image_facts(Path(path), 1, [1])
    assert dpi == 96 and facts.dpi_assumed

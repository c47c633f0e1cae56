"""Issue 29 point 3, the library: `publish` keeps each page's word positions, so `export LIB
--format alto|pdf` writes the formats from a library as from a run, and `search` says where on
the page a hit lies (the box around the query's words, in the scan's pixels). A real Tesseract
reading of a real page."""

from __future__ import annotations

import json
import shutil

import numpy as np
from PIL import Image

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.runfolder.record import Row

PAGE = GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg"


def test_a_library_keeps_positions_for_export_and_search(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    with Image.open(PAGE) as im:
        im.convert("L").save(scans / "letter.png")
    run, lib = tmp_path / "run", tmp_path / "lib"
    assert run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract", "--workers", "1").returncode == 0
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    pos = Row.of(finals(run)[("letter", 1)]).word_positions()
    res = run_cli("search", str(lib), "approached", "--json")
    assert res.returncode == 0, res.stderr
    hit = json.loads(res.stdout)[0]
    word = next(w for w in pos.words() if w[5] == "approached")
    assert hit["region"] == {"box": list(word[:4]), "width": pos.width, "height": pos.height, "words": ["approached"],
                             "image": "image file"}
    with Image.open(scans / "letter.png") as im:
        x0, y0, x1, y1 = hit["region"]["box"]
        assert (np.asarray(im)[y0:y1, x0:x1] < 128).mean() > 0.05  # the word's ink
    # A phrase: the box around its words; a word not on the page's words: no region, still a hit.
    res = run_cli("search", str(lib), '"facts approached"', "--json")
    phrase = json.loads(res.stdout)[0]["region"]
    assert phrase["words"] == ["facts", "approached"] and phrase["box"][0] < word[0]
    plain = run_cli("search", str(lib), "approached")
    assert "\t@" + ",".join(str(v) for v in word[:4]) in plain.stdout
    # The formats from the library, as from the run.
    out = tmp_path / "alto"
    assert run_cli("export", str(lib), "--format", "alto", "--out", str(out)).returncode == 0
    assert (out / "letter.alto.xml").read_text(encoding="utf-8").count("<String ") == len(pos.words())


def test_a_damaged_page_file_costs_its_hits_their_region_not_the_search(tmp_path):
    from vlmocr.library.catalog import SearchHit
    from vlmocr.library.regions import with_regions

    lib = tmp_path / "lib"
    (lib / "docs" / "a").mkdir(parents=True)
    (lib / "docs" / "a" / "pages.jsonl").write_bytes(b'{"doc_id": "a", "page": 1, "status": "ok"\n not json\n')
    hit = SearchHit(lib_id="a", doc_id="a", page=1, snippet="x", score=1.0, status="ok", path="docs/a")
    assert with_regions(lib, [hit], "x") == [hit]

"""Issue 30, point 1, CPU tiers: `--engine tesseract,rapidocr` reads every page with Tesseract and
asks RapidOCR only for the pages whose Tesseract reading fails its signal, keeping the better of
the two; the record names the engine that read it, the tier and why, and the other reading's
score. Real engines on real pages (tests/data/gt): a Fraktur page Tesseract reads well with
German data, and an English typescript read with German data, which fails the signal."""

from __future__ import annotations

import shutil

from support.cli import run_cli
from support.components import GT, need
from support.records import finals
from vlmocr.engines.registry import CPU_ENGINES, engine_key_material


def test_the_second_tier_reads_only_the_pages_the_first_fails(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    shutil.copy(GT / "goethe" / "goethe_0014.png", scans / "fraktur.png")
    shutil.copy(GT / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg", scans / "english.jpg")
    run = tmp_path / "run"
    res = run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract,rapidocr", "--lang", "deu",
                  "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    recs = {doc: rec for (doc, _), rec in finals(run).items()}
    first = recs["fraktur"]
    assert (first["engine"], first["status"]) == ("tesseract", "ok")
    assert first["engine_choice"] == "tesseract: tier 1 of 2: passed its signal"
    assert "alternatives" not in first["quality"]  # RapidOCR never read it
    second = recs["english"]
    assert second["engine_choice"].startswith(f"{second['engine']}: tier 2 of 2, tesseract failed the signal; ")
    others = {a["engine"] for a in second["quality"]["alternatives"]}
    assert others == {"tesseract", "rapidocr"} - {second["engine"]}
    # Each tier's reading, in order: the page reached tier len(tiers).
    assert [t["engine"] for t in first["tiers"]] == ["tesseract"] and first["tiers"][0]["status"] == "ok"
    assert [t["engine"] for t in second["tiers"]] == ["tesseract", "rapidocr"]
    assert second["tiers"][0]["status"] != "ok" and all(t["seconds"] > 0 for t in second["tiers"])
    # The reading not kept stays in the raw layer with its text; the kept one is the record's text.
    assert [("text" in t) for t in second["tiers"]] == [t["engine"] != second["engine"] for t in second["tiers"]]

    # The report shows the tiers: pages read and kept per tier, engine seconds, why pages went on.
    site = tmp_path / "site"
    res = run_cli("report", str(run), "--out", str(site))
    assert res.returncode == 0, res.stderr
    html = (site / "index.html").read_text(encoding="utf-8")
    table = html[html.index('id="tiers-table"'):]
    table = table[:table.index("</table>")]
    rows = [r for r in table.split("<tr>")[2:]]
    kept_second = int(second["engine"] == "rapidocr")
    assert rows[0].startswith(f"<td>1</td><td>tesseract</td><td>2</td><td>{2 - kept_second}</td>"), rows[0]
    assert f"<td>1 {second['tiers'][0]['status']}</td>" in rows[0], rows[0]
    assert rows[1].startswith(f"<td>2</td><td>rapidocr</td><td>1</td><td>{kept_second}</td>"), rows[1]


def test_the_cascade_is_its_own_reading():
    casc, both = CPU_ENGINES["tesseract,rapidocr"], CPU_ENGINES["tesseract+rapidocr"]
    assert casc.cascade and not both.cascade and casc.parts == both.parts == ("tesseract", "rapidocr")
    # Both engines' settings are in its key (it may read with either).
    assert engine_key_material("tesseract,rapidocr", "deu") == engine_key_material("tesseract+rapidocr", "deu")


def test_a_tier_with_no_model_for_the_script_is_skipped(tmp_path):
    """RapidOCR ships no model for polytonic Greek: on a Zonaras page Tesseract (grc) reads at
    17 % CER and fails its signal, and RapidOCR's fragments (43 % CER) scored 0.817 to its 0.812,
    so the cascade kept them (bench_cascade.py, 2026-12-06). A tier that cannot read the page's
    script is not asked; the record says so."""
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    scans = tmp_path / "in"
    scans.mkdir()
    shutil.copy(GT / "zonaras" / "zonaras_0036.png", scans / "greek.png")
    run = tmp_path / "run"
    res = run_cli("run", str(scans), "--out", str(run), "--engine", "tesseract,rapidocr", "--lang", "grc",
                  "--workers", "1")
    assert res.returncode in (0, 2), res.stderr
    (rec,) = finals(run).values()
    assert rec["engine"] == "tesseract" and [t["engine"] for t in rec["tiers"]] == ["tesseract"]
    assert rec["status"] != "ok"  # Tesseract's reading failed its signal: it stays for review
    assert rec["engine_choice"] == ("tesseract: tier 1 of 2, tesseract failed the signal; "
                                    "rapidocr has no Grek model")
    assert "alternatives" not in rec["quality"] or all(a["engine"] != "rapidocr" for a in rec["quality"]["alternatives"])


def test_which_scripts_a_tier_reads():
    rapid, tess = CPU_ENGINES["rapidocr"], CPU_ENGINES["tesseract"]
    assert rapid.reads_script("Latn") and rapid.reads_script("Latf") and not rapid.reads_script("Grek")
    assert tess.reads_script("Grek")  # with language data, checked before the run
    assert rapid.reads_script(None)  # a page whose script is not known: asked

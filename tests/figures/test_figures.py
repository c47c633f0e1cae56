"""`vlmocr describe`: figures found by a grounded model are cropped from real pages, described
by a VLM over real HTTP, recorded in figures.jsonl and put into the assembled Markdown.

The pages are real PDFs (reportlab) with real figures drawn in: a vector frame and bars plus a
raster strip carrying a figure code (vlmocr.testing.pagecode). The page-reading requests carry
the page code (top of the page), the describing requests carry only the crop, whose figure code
the test server decodes: a crop cut from the wrong place answers "NOCODE", a right one answers
that figure's scripted description."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
from PIL import Image

from support.cli import run_cli
from support.figures import (
    DESCRIPTIONS,
    DPI,
    FIGURES,
    ICON,
    PAGE_H,
    PAGE_W,
    SCALE,
    SCRIPT,
    make_figure_pdf,
    px,
)
from support.records import finals
from vlmocr.exceptions import EndpointUnavailable
from vlmocr.figures.find import Figure, normalize_bbox, page_figures, pixel_boxes
from vlmocr.figures.placement import FigureRef, add_figures, alt_text, apply_descriptions, figure_markdown
from vlmocr.profiles import prompt_id
from vlmocr.reading.describe import describe_run
from vlmocr.runfolder.assemble import assemble_markdown
from vlmocr.runfolder.record import Row
from vlmocr.runfolder.rundir import FIGURES_FILE
from vlmocr.runfolder.store import checked_line
from vlmocr.settings.figures import DEFAULT_PROMPT, DescribeOptions
from vlmocr.testing.openai_server import NOCODE, ServerConfig, serve_in_process


@pytest.fixture(scope="module")
def server():
    with serve_in_process(ServerConfig(answer="script", script=SCRIPT, retry_after=0)) as srv:
        yield srv


@pytest.fixture(scope="module")
def base_run(tmp_path_factory, server) -> Path:
    """The real page run: `vlmocr run` with the deepseek-ocr profile against the grounded server."""
    root = tmp_path_factory.mktemp("figures")
    pdf = make_figure_pdf(root / "report.pdf")
    run = root / "run"
    res = run_cli("run", str(pdf), "--out", str(run), "--endpoint", server.url, "--profile", "deepseek-ocr",
                  "--engine", "openai", "--workers", "2", "--request-timeout", "10",
                  env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode == 0, res.stderr
    recs = finals(run)
    assert [len([b for b in r.get("blocks") or [] if b["type"].lower() in ("image", "chart")])
            for _, r in sorted(recs.items())] == [2, 2, 0]
    return run


@pytest.fixture
def run(base_run, server, tmp_path) -> Path:
    """A fresh copy of the page run, and a server with no faults and an empty log."""
    server.configure(faults={})
    server.reset()
    dest = tmp_path / "run"
    shutil.copytree(base_run, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest


def options(server, **kw) -> DescribeOptions:
    return DescribeOptions(endpoint=server.url, model="test-model", workers=2, request_timeout=10, **kw)


def figure_records(run: Path) -> list[dict]:
    path = run / FIGURES_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def last_by_figure(run: Path) -> dict[tuple[str, int, int], dict]:
    return {(r["doc_id"], r["page"], r["figure"]): r for r in figure_records(run)}


def describe_requests(server) -> list[dict]:
    return [r for r in server.requests() if r["page"] not in (101, 102, 103)]


# ---------------------------------------------------------------------------------------------


def test_crops_match_the_drawn_figures_and_each_gets_its_description(run, server):
    summary = describe_run(run, options(server))
    assert summary.exit_code() == 0, summary.done_line()
    assert (summary.figures, summary.small, summary.selected, summary.described_now) == (4, 1, 3, 3)
    recs = last_by_figure(run)
    assert sorted(recs) == [("report", 1, 1), ("report", 2, 1), ("report", 2, 2)]
    expected = {("report", 1, 1): FIGURES[101][0], ("report", 2, 1): FIGURES[102][0],
                ("report", 2, 2): FIGURES[102][1]}
    for ident, (code, x, y, w, h, kind) in expected.items():
        rec = recs[ident]
        assert rec["status"] == "ok" and rec["description"] == DESCRIPTIONS[code], rec
        assert rec["type"] == kind and rec["model"] == "test-model" and rec["attempt"] == 1
        assert rec["prompt_id"] == prompt_id(DEFAULT_PROMPT) and rec["dpi"] == DPI
        assert rec["tokens_in"] > 0 and rec["tokens_out"] > 0 and rec["finished_at"]
        # The figure box in pixels is where the figure was drawn, within a few pixels.
        drawn = px(x, y, w, h)
        assert all(abs(a - b) <= 3 for a, b in zip(rec["box_px"], drawn)), (rec["box_px"], drawn)
        margin = round(0.005 * max(PAGE_W, PAGE_H) * SCALE)
        assert rec["crop_px"] == [rec["box_px"][0] - margin, rec["box_px"][1] - margin,
                                  rec["box_px"][2] + margin, rec["box_px"][3] + margin]
        # The saved crop is what was sent, and it shows the figure: its ink is the drawn box.
        path = run / rec["crop"]
        assert rec["crop"] == f"figures/report/p{ident[1]}-f{ident[2]}.png" and path.is_file()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == rec["crop_sha256"]
        with Image.open(path) as crop:
            assert crop.size == (rec["width"], rec["height"])
            ink = crop.convert("L").point(lambda v: 255 if v < 128 else 0).getbbox()
        assert ink is not None
        found = [ink[0] + rec["crop_px"][0], ink[1] + rec["crop_px"][1], ink[2] + rec["crop_px"][0],
                 ink[3] + rec["crop_px"][1]]
        assert all(abs(a - b) <= 3 for a, b in zip(found, drawn)), (found, drawn)
    # The server decoded each figure's own code from the crops it received: nothing else was sent.
    log = describe_requests(server)
    assert sorted(r["page"] for r in log) == [9001, 9002, 9003]
    sizes = sorted(tuple(r["image_sizes"][0]) for r in log)
    assert sizes == sorted((r["width"], r["height"]) for r in recs.values())
    assert all("Describe this figure" in r["prompt"] and r["max_tokens"] == 1024 for r in log)


def test_resume_sends_nothing_and_settings_changes_describe_again(run, server):
    first = describe_run(run, options(server))
    assert first.described_now == 3 and len(figure_records(run)) == 3
    server.reset()
    again = describe_run(run, options(server))
    assert again.described_now == 0 and again.done_before == 3 and again.exit_code() == 0
    assert server.stats()["total"] == 0 and len(figure_records(run)) == 3
    # A different resolution is another describe key: everything is described again.
    other = describe_run(run, options(server, dpi=150))
    assert other.key != first.key and other.described_now == 3
    assert len(describe_requests(server)) == 3
    # --force describes again under the same key; the attempt number goes on counting.
    server.reset()
    forced = describe_run(run, options(server, force=True))
    assert forced.described_now == 3 and len(describe_requests(server)) == 3
    recs = [r for r in figure_records(run) if r["key"] == first.key]
    assert sorted(r["attempt"] for r in recs) == [1, 1, 1, 2, 2, 2]


def test_statuses_ladder_and_resubmit_retries_errors(run, server):
    server.configure(faults={"loop": {"pages": [9001], "times": 1}, "500": {"pages": [9002]},
                             "empty": {"pages": [9003], "times": 1}})
    first = describe_run(run, options(server, max_retries=1, no_retry=False))
    recs = figure_records(run)
    by_fig = {}
    for r in recs:
        by_fig.setdefault((r["page"], r["figure"]), []).append(r)
    # A loop climbs the ladder (one record per attempt) and ends ok.
    assert [(r["status"], r["attempt"]) for r in by_fig[(1, 1)]] == [("loop", 1), ("ok", 2)]
    assert "ladder:1" in by_fig[(1, 1)][1]["flags"] and by_fig[(1, 1)][1]["description"] == DESCRIPTIONS[9001]
    # 500 after the HTTP retries: status error, with the server's message.
    assert [r["status"] for r in by_fig[(2, 1)]] == ["error"] and "500" in by_fig[(2, 1)][0]["error"]
    assert [r["status"] for r in by_fig[(2, 2)]] == ["empty", "ok"]
    assert first.statuses == {"ok": 2, "error": 1} and first.exit_code() == 1

    # Resubmit: only the error is described again.
    server.configure(faults={})
    server.reset()
    second = describe_run(run, options(server))
    assert [r["page"] for r in describe_requests(server)] == [9002]
    assert second.statuses == {"ok": 3} and second.exit_code() == 0
    last = last_by_figure(run)[("report", 2, 1)]
    assert last["status"] == "ok" and last["attempt"] == 2 and last["description"] == DESCRIPTIONS[9002]


def test_review_status_without_ladder_then_resubmit_continues_it(run, server):
    server.configure(faults={"empty": {"pages": [9003], "times": 1}, "refuse": {"pages": [9002], "times": 1}})
    first = describe_run(run, options(server, no_retry=True))
    assert first.statuses == {"ok": 1, "empty": 1, "refused": 1} and first.exit_code() == 2  # review only: a resubmit continues the ladder
    server.configure(faults={})
    server.reset()
    second = describe_run(run, options(server))
    assert sorted(r["page"] for r in describe_requests(server)) == [9002, 9003]
    last = last_by_figure(run)
    assert {k: (r["status"], r["attempt"]) for k, r in last.items()} == {
        ("report", 1, 1): ("ok", 1), ("report", 2, 1): ("ok", 2), ("report", 2, 2): ("ok", 2)}
    assert "ladder:1" in last[("report", 2, 2)]["flags"] and second.exit_code() == 0


def test_min_area_and_max_figures(run, server):
    capped = describe_run(run, options(server, max_figures=2))
    assert (capped.described_now, capped.over_cap, capped.missing) == (2, 1, 1)
    assert capped.exit_code() == 1  # figures remain: resubmit
    assert len(describe_requests(server)) == 2
    server.reset()
    rest = describe_run(run, options(server))
    assert rest.described_now == 1 and rest.missing == 0 and rest.exit_code() == 0
    assert len(describe_requests(server)) == 1
    # --min-area 0 takes the icon too: a crop of the drawn dot, answered as a figure without code.
    server.reset()
    icons = describe_run(run, options(server, min_area=0.0))
    assert (icons.small, icons.selected, icons.described_now) == (0, 4, 1)
    icon = last_by_figure(run)[("report", 1, 2)]
    assert icon["status"] == "ok" and icon["description"] == NOCODE and icon["area"] < 0.001
    assert (run / "figures/report/p1-f2.png").is_file()
    assert all(abs(a - b) <= 3 for a, b in zip(icon["box_px"], px(*ICON)))


def test_dry_run_counts_and_estimates_without_requests(run, server):
    res = run_cli("describe", str(run), "--model", "test-model", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert (data["figures"], data["small"], data["owed"], data["dry_run"]) == (4, 1, 3, True)
    assert server.stats()["total"] == 0 and not (run / FIGURES_FILE).exists()
    est = data["estimate"]
    prompt_tokens = math.ceil(len(DEFAULT_PROMPT) / 4)
    image_tokens = sum(math.ceil(f["crop_width"] * f["crop_height"] / 784) for f in est["per_figure"])
    assert est["image_tokens"] == image_tokens and est["prompt_tokens"] == 3 * prompt_tokens
    assert est["output_tokens"] == 3 * 1024
    assert est["total_tokens"] == image_tokens + 3 * prompt_tokens + 3 * 1024
    # The estimate measured the crops that a real describe then cuts.
    describe_run(run, options(server))
    real = {(r["page"], r["figure"]): (r["width"], r["height"]) for r in figure_records(run)}
    assert {(f["page"], f["figure"]): (f["crop_width"], f["crop_height"]) for f in est["per_figure"]} == real
    # A dry run after it owes nothing.
    after = describe_run(run, DescribeOptions(model="test-model", dry_run=True))
    assert after.owed == 0 and after.done_before == 3 and after.estimate["total_tokens"] == 0


def test_cli_describes_and_markdown_carries_alt_text(run, server):
    res = run_cli("describe", str(run), "--endpoint", server.url, "--model", "test-model", "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("Described: 3 figures, records=3 ok=3")
    md = (run / "docs" / "report.md").read_text()
    link1 = f"![{DESCRIPTIONS[9001]}](../figures/report/p1-f1.png)"
    # Where the figure block sits: after the paragraph before it, before its caption.
    assert ("Sales grew in every year of the period.\n\n" + link1 + "\n\nFigure 1: Sales by year.") in md
    assert "p1-f2.png" not in md  # the icon was not described
    link2 = f"![{DESCRIPTIONS[9002]}](../figures/report/p2-f1.png)"
    link3 = f"![{DESCRIPTIONS[9003]}](../figures/report/p2-f2.png)"
    assert ("Two figures follow.\n\n" + link2 + "\n\nBetween the figures.\n\n" + link3 + "\n\n<!-- page 3") in md
    assert "A page of text without figures." in md
    # Pages keep their markers and every described figure appears once.
    assert md.count("<!-- page ") == 3 and md.count("](../figures/") == 3
    assert figure_markdown(run)[("report", 2)] == [link2, link3]
    # Describing again rebuilds the same document.
    assert run_cli("describe", str(run), "--endpoint", server.url, "--model", "test-model").returncode == 0
    assert (run / "docs" / "report.md").read_text() == md
    # The integration point for outputs: final page records in, records with figures out.
    lines = [r for _, r in sorted(finals(run).items())]
    recs = [Row.of(r) for r in lines]
    assert assemble_markdown(add_figures(run, recs)) == md
    # A page re-read with the figure elsewhere does not keep the stale description.
    moved = json.loads(json.dumps(lines))
    moved[0]["blocks"][2]["bbox"] = [100, 100, 200, 200]
    assert "p1-f1.png" not in assemble_markdown(add_figures(run, [Row.of(r) for r in moved]))
    assert add_figures(run, recs[2:]) == recs[2:]  # a page without figures is left as it is
    # Exports carry the descriptions too (links relative to the run directory).
    out = run.parent / "export.jsonl"
    assert run_cli("export", str(run), "--format", "jsonl", "--out", str(out)).returncode == 0
    exported = out.read_text() if out.is_file() else "".join(p.read_text() for p in out.rglob("*.jsonl"))
    assert f"![{DESCRIPTIONS[9001]}](figures/report/p1-f1.png)" in json.loads(exported.splitlines()[0])["text"]
    # ... and so does the library: its pages, its search and its exports.
    lib = run.parent / "lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    found = run_cli("search", str(lib), "framed")  # a word only the description of p2-f1 has
    assert found.returncode == 0 and "report" in found.stdout, found.stdout
    out = run.parent / "lib-export.jsonl"
    assert run_cli("export", str(lib), "--format", "jsonl", "--out", str(out)).returncode == 0
    exported = out.read_text() if out.is_file() else "".join(p.read_text() for p in out.rglob("*.jsonl"))
    assert f"![{DESCRIPTIONS[9001]}](figures/report/p1-f1.png)" in json.loads(exported.splitlines()[0])["text"]


def test_relative_source_found_with_source_root(run, server, base_run):
    # Records name the source as given (here a bare file name), and the run's inputs are gone.
    lines = [json.loads(line) for line in (run / "pages.jsonl").read_text().splitlines()]
    (run / "pages.jsonl").write_bytes(b"".join(checked_line({**r, "source": "report.pdf"}) for r in lines))
    info = json.loads((run / "run.json").read_text())
    info["settings"]["inputs"] = [str(run / "gone.pdf")]
    (run / "run.json").write_text(json.dumps(info))
    lost = describe_run(run, options(server))
    assert lost.statuses == {"error": 3} and lost.exit_code() == 1 and server.stats()["total"] == 0
    assert all("source not found" in r["error"] for r in figure_records(run))
    found = describe_run(run, options(server, source_roots=[base_run.parent]))
    assert found.statuses == {"ok": 3} and len(describe_requests(server)) == 3


def test_unserved_model_is_endpoint_unavailable(run, server):
    with pytest.raises(EndpointUnavailable, match="does not serve model 'other-model'"):
        describe_run(run, DescribeOptions(endpoint=server.url, model="other-model", workers=1))
    res = run_cli("describe", str(run), "--endpoint", server.url, "--model", "other-model")
    assert res.returncode == 5
    assert run_cli("describe", str(run)).returncode == 3  # no endpoint: usage


# --- pure functions ---------------------------------------------------------------------------


def ref(figure: int, description: str, anchor: dict | None = None) -> FigureRef:
    return FigureRef("d", 1, figure, f"figures/d/p1-f{figure}.png", description, (0, 0, 10, 10), anchor or {})


def test_apply_descriptions_placeholders_anchors_and_page_end():
    # A placeholder the model left is replaced by the described figure.
    text = "Intro.\n\n![](images/img_0.png)\n\nOutro."
    out = apply_descriptions(text, [ref(1, "A map of the coast.")])
    assert out == "Intro.\n\n![A map of the coast.](../figures/d/p1-f1.png)\n\nOutro."
    assert apply_descriptions(out, [ref(1, "A map of the coast.")]) == out  # idempotent
    # The n-th placeholder is figure n, also when figure 1 was put in by an earlier call.
    two = "![](a.png)\n\n![](b.png)"
    once = apply_descriptions(two, [ref(1, "One.")])
    assert apply_descriptions(once, [ref(1, "One."), ref(2, "Two.")]) == \
        "![One.](../figures/d/p1-f1.png)\n\n![Two.](../figures/d/p1-f2.png)"
    # No placeholder and no anchor: appended at the page end.
    assert apply_descriptions("Just text.", [ref(1, "A photo.")], link_prefix="") == \
        "Just text.\n\n![A photo.](figures/d/p1-f1.png)"
    # Anchored after the line before it; two figures at one place keep their order.
    text = "First paragraph.\nIts last line.\n\nSecond paragraph."
    figs = [ref(2, "Two.", {"before": "Its last line."}), ref(1, "One.", {"before": "Its last line."})]
    assert apply_descriptions(text, figs) == ("First paragraph.\nIts last line.\n\n![One.](../figures/d/p1-f1.png)"
                                              "\n\n![Two.](../figures/d/p1-f2.png)\n\nSecond paragraph.")
    # An own text (a caption carried by the block) wins: the image goes before it.
    assert apply_descriptions("A.\n\nFig. 3 caption\n\nB.", [ref(1, "X.", {"text": "Fig. 3 caption"})]) == \
        "A.\n\n![X.](../figures/d/p1-f1.png)\n\nFig. 3 caption\n\nB."
    # Alt text is one line with brackets escaped; an empty description adds nothing.
    assert alt_text("A [big]\nchart") == r"A \[big\] chart"
    assert apply_descriptions("T.", [ref(1, "")]) == "T."


def test_boxes_are_normalized_and_numbered_in_block_order():
    assert normalize_bbox([900, 800, 100, 50]) == [100, 50, 900, 800]
    assert normalize_bbox([-5, 10, 1200, 20]) == [0, 10, 1000, 20]
    assert normalize_bbox([5, 5, 5, 9]) is None and normalize_bbox(None) is None and normalize_bbox([1, 2]) is None
    assert normalize_bbox([50, 100, 150, 300], scale=(500, 1000)) == [100, 100, 300, 300]  # dots.ocr pixels
    box, crop = pixel_boxes([100, 200, 300, 400], 1000, 2000, 0.005)
    assert box == [100, 400, 300, 800] and crop == [90, 390, 310, 810]
    assert pixel_boxes([990, 990, 1000, 1000], 100, 100, 0.05)[1] == [94, 94, 100, 100]
    rec = Row.of({"doc_id": "d", "page": 2, "source": "d.pdf", "key": "k", "status": "ok", "blocks": [
        {"type": "text", "bbox": [0, 0, 1000, 100], "text": "Above.\nLast line above."},
        {"type": "Figure", "bbox": None, "text": ""},
        {"type": "PICTURE", "bbox": [100, 200, 500, 600], "text": ""},
        {"type": "image_caption", "bbox": [100, 610, 500, 640], "text": "Caption here."},
    ]})
    (fig,) = page_figures(rec)
    assert isinstance(fig, Figure) and (fig.figure, fig.block_index) == (2, 2)  # the box-less one keeps no. 1
    assert fig.anchor == {"text": "", "before": "Last line above.", "after": "Caption here."}
    assert fig.area == pytest.approx(0.16) and fig.crop_rel == "figures/d/p2-f2.png"


def test_describing_prompt_comes_from_option_user_profile_or_default(tmp_path):
    from vlmocr.profiles import load_profile
    from vlmocr.settings.figures import describing_profile

    shipped = load_profile("deepseek-ocr")  # a page-reading recipe: its prompt transcribes
    prof, text = describing_profile(shipped, None, None)
    assert text == DEFAULT_PROMPT == prof.prompt and prof.max_tokens == 1024 and not prof.image_only
    assert prof.extra_body == shipped.extra_body  # the server-side settings stay
    assert describing_profile(shipped, "Say what the chart shows.", 300)[0].max_tokens == 300
    assert describing_profile(shipped, "Say what the chart shows.", None)[1] == "Say what the chart shows."
    own = tmp_path / "alt-text.toml"
    own.write_text('name = "alt-text"\nprompt = "Write alt text for this figure."\nmax_tokens = 200\n')
    prof, text = describing_profile(load_profile(own), None, None)
    assert text == "Write alt text for this figure." and prof.max_tokens == 200


def test_describe_library_describes_what_the_library_lacks_and_publishes_it_again(run, server, tmp_path):
    """`describe --library LIB` (issue 18, point 5): the documents published before their figures
    were described get their descriptions in the runs they came from, and the library's text and
    search carry them; a second call sends nothing and publishes nothing."""
    lib = tmp_path / "lib"
    assert run_cli("publish", str(run), "--library", str(lib)).returncode == 0
    (folder,) = (lib / "docs").iterdir()
    assert "framed" not in (folder / "document.txt").read_text()
    assert "report" not in run_cli("search", str(lib), "framed").stdout
    args = ("describe", "--library", str(lib), "--endpoint", server.url, "--model", "test-model", "--workers", "2")
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith(f"Described: 3 figures of 1 documents in {lib} (1 runs), ok=3 missing=0 (now 3)"), line
    assert "1 documents published again" in line
    assert len(describe_requests(server)) == 3
    (folder,) = (lib / "docs").iterdir()
    text = (folder / "document.txt").read_text()
    assert all(d in text for d in DESCRIPTIONS.values())
    found = run_cli("search", str(lib), "framed")  # a word only the description of p2-f1 has
    assert found.returncode == 0 and "report" in found.stdout, found.stdout
    # Again: every figure is described, nothing is sent, the library is left as it is.
    server.reset()
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    assert "(now 0); 0 documents published again" in res.stdout
    assert describe_requests(server) == []
    # A run that is no longer there: said, not a failure (there is nothing to describe from).
    shutil.rmtree(run)
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    assert "1 documents whose run is gone (1 runs)" in res.stdout
    # RUN and --library are one or the other.
    res = run_cli("describe", str(tmp_path), "--library", str(lib), "--model", "m")
    assert res.returncode == 3 and "--library" in res.stderr

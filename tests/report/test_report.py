"""`vlmocr report`: the static HTML report, built from real records over real files and opened
in headless Chromium from a file:// URL (no server, no network).

The browser tests check the numbers shown against the records, walk the review queue with
the keyboard, take a screenshot, and prove that OCR text holding markup (`<script>`,
`<img onerror>`) is shown as text and never runs."""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO
from support.documents import make_text_pdf
from support.report_runs import XSS, XSS_DOC, FlaggedRun, make_flagged_run, write_large_run
from vlmocr.evaluation import char_errors
from vlmocr.report import ReportOptions, build_report, diff_ops
from vlmocr.runfolder.record import PageRecord, Status
from vlmocr.runfolder.store import PAGES_FILE, RecordWriter, iter_records

SCREENSHOT_DOC = REPO / "docs" / "report-screenshot.png"


@pytest.fixture(scope="module")
def flagged(tmp_path_factory: pytest.TempPathFactory) -> tuple[FlaggedRun, Path, dict]:
    root = tmp_path_factory.mktemp("report")
    run = make_flagged_run(root)
    out = root / "report"
    proc = run_cli("report", str(run.run_dir), "--out", str(out), "--truth", str(run.truth_csv), "--json",
                   cwd=root)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return run, out, result


def _url(path: Path, fragment: str = "") -> str:
    return path.resolve().as_uri() + (f"#{fragment}" if fragment else "")


def _expected_cer(run: FlaggedRun) -> float:
    truth = {("alpha", 1): "Alpha page 1\nThe quick brown fox jumps over the lazy dog.", ("alpha", 5): "Alpha page 5",
             ("gamma", 1): "Gamma scanned page\nTypewritten report of 1938"}
    edits = refs = 0
    for key, ref in truth.items():
        e, n = char_errors(run.finals[key]["text"], ref)
        edits, refs = edits + e, refs + n
    return edits / refs


# ------------------------------------------------------------------------------ no browser


def test_report_command_counts_and_files(flagged) -> None:
    run, out, result = flagged
    pages = run.pages()
    assert result["pages"] == len(pages) == 10
    assert result["documents"] == 5
    assert result["records"] == sum(1 for _ in iter_records(run.run_dir / PAGES_FILE)) == 11
    assert result["statuses"] == dict(run.statuses)
    # Flagged: every status but ok (7 pages), and gamma p1 for its CER above 10 %.
    assert result["flagged"] == 8
    assert result["cer"] == pytest.approx(_expected_cer(run))
    for name in ("index.html", "review.html", "doc.html", "assets/report.js", "assets/report.css", "data/meta.js",
                 "data/docs.js", "data/c/0.js", "data/q/all/0.js", "data/q/cer/0.js"):
        assert (out / name).is_file(), name
    # Thumbnails: flagged pages whose source exists (alpha 2–6, gamma 1), not the page-0 failure
    # nor the document whose file is missing.
    thumbs = sorted((out / "thumbs").glob("*.jpg"))
    assert len(thumbs) == result["thumbs"] == 6
    from PIL import Image

    with Image.open(thumbs[0]) as im:
        assert max(im.size) == 800
    assert any("not found" in n for n in result["notes"])


def test_ocr_markup_never_written_raw(flagged) -> None:
    _run, out, _ = flagged
    for path in out.rglob("*"):
        if path.suffix not in (".html", ".js") or path.parent.name == "assets":
            continue
        data = path.read_text(encoding="utf-8")
        assert "<script>document.title" not in data, path
        if path.suffix == ".js":
            assert "<" not in data and ">" not in data, f"{path} holds raw markup characters"
    index = (out / "index.html").read_text(encoding="utf-8")
    assert XSS_DOC not in index and "&lt;img src=x onerror=alert(1)&gt;" in index
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in index
    # The only script element of every page is the report's own file, and the policy forbids others.
    for name in ("index.html", "review.html", "doc.html"):
        html = (out / name).read_text(encoding="utf-8")
        assert re.findall(r"<script[^>]*>", html) == ['<script src="assets/report.js">']
        assert "script-src 'self'" in html
    js = (REPO / "src/vlmocr/report/static/report.js").read_text(encoding="utf-8")
    assert not re.search(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML\s*\(|document\.write\s*\(", js)


def test_diff_ops_rebuild_both_sides() -> None:
    pairs = [("Garnrna scanncd pagc", "Gamma scanned page"), ("", "only truth"), ("only text", ""),
             ("a  b\nc", "a b c"), ("The quick brown fox", "The quick brown fox"),
             ("x" * 500 + " tail", "y" * 450 + " tail"), ("a b c d", "a x y d"), ("p q", "r s t")]
    for text, truth in pairs:
        ops = diff_ops(text, truth)
        assert "".join(s for op, s in ops if op in "=+") == text
        norm = " ".join("".join(s for op, s in ops if op in "=-").split())
        assert norm == " ".join(truth.split())
        assert all(op in ("=", "+", "-") for op, _ in ops)
    assert diff_ops("same", "same") == [["=", "same"]]
    # A misreading is shown character by character; a garbled line as one change.
    assert diff_ops("are rnade of", "are made of") == [["=", "are "], ["-", "m"], ["+", "rn"], ["=", "ade of"]]
    assert diff_ops("x ar e aa a am Tfe\nend", "x are made of cheap composition\nend") == [
        ["=", "x "], ["-", "are made of cheap composition"], ["+", "ar e aa a am Tfe"], ["=", "\nend"]]


def test_report_usage_errors(tmp_path: Path, flagged) -> None:
    run, _out, _ = flagged
    proc = run_cli("report", str(tmp_path / "nope"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 3 and "not a run directory" in proc.stderr
    proc = run_cli("report", str(run.run_dir), "--out", str(run.run_dir))
    assert proc.returncode == 3
    (tmp_path / "x" / "data").mkdir(parents=True)
    (tmp_path / "x" / "data" / "precious.csv").write_text("keep me")
    proc = run_cli("report", str(run.run_dir), "--out", str(tmp_path / "x"))
    assert proc.returncode == 3 and (tmp_path / "x" / "data" / "precious.csv").exists()


def test_rebuild_in_place_and_thumb_cap(tmp_path: Path) -> None:
    run = make_flagged_run(tmp_path / "r")
    out = tmp_path / "report"
    first = build_report(ReportOptions(run.run_dir, out, thumb_size=120))
    assert first.thumbs == 5  # no truth: gamma p1 is not flagged
    again = build_report(ReportOptions(run.run_dir, out, thumb_size=120, max_thumbs=2))
    assert again.thumbs == 2 and again.thumbs_skipped == 4  # alpha p2, p3 get the two; alpha p4–6 and delta are over
    assert len(list((out / "thumbs").glob("*.jpg"))) == 2  # the first build's extra thumbnails are gone
    assert not list(out.glob(".data.*"))
    assert any("--max-thumbs 2" in n for n in again.notes)



def test_a_run_json_that_is_not_utf8_is_a_note_not_a_crash(tmp_path: Path) -> None:
    run = make_flagged_run(tmp_path / "r")
    (run.run_dir / "run.json").write_bytes(b'{"settings": {"model": "caf\xe9"}}')  # Latin-1, not UTF-8
    result = build_report(ReportOptions(run.run_dir, tmp_path / "report", thumb_size=120))
    assert result.pages == 10
    assert any(n.startswith("run.json unreadable (") for n in result.notes)


def test_a_slurm_shard_gets_thumbnails_from_the_original_files(tmp_path: Path) -> None:
    """A shard's records name the staged link (0001.pdf); with the links gone (RUN/staged cleaned
    up, or RUN copied elsewhere), RUN/staged/originals.csv still names the files."""
    (tmp_path / "My scans").mkdir()
    original = make_text_pdf(tmp_path / "My scans" / "Report (final).pdf", [["First page"], ["Second page"]])
    cluster = tmp_path / "RUN"
    (cluster / "staged").mkdir(parents=True)
    (cluster / "staged" / "originals.csv").write_text(
        f"kind,doc_id,staged,original,pages,dpi\nbulk,report,0001.pdf,{original},,\n", encoding="utf-8")
    shard = cluster / "shards" / "1"
    shard.mkdir(parents=True)
    with RecordWriter(shard / PAGES_FILE) as w:
        for page in (1, 2):
            w.append(PageRecord(doc_id="report", source="0001.pdf", page=page, key="k", status=Status.loop,
                                text="x x x", engine="test"))
    result = build_report(ReportOptions(shard, tmp_path / "report", thumb_size=120))
    assert result.thumbs == 2
    assert not any("not found" in n for n in result.notes if "run.json" not in n)

# ------------------------------------------------------------------------------ in the browser


@pytest.mark.browser
def test_index_shows_the_numbers_of_the_records(flagged, page) -> None:
    run, out, _ = flagged
    page.goto(_url(out / "index.html"))
    pages = run.pages()
    def shown(ident: str) -> str:
        return page.eval(f"document.getElementById({json.dumps(ident)}).textContent")

    assert shown("n-pages") == str(len(pages))
    assert shown("n-docs") == "5"
    assert shown("n-records") == "11"
    counts = page.eval("Object.fromEntries([...document.querySelectorAll('#status-table tbody tr')]"
                       ".map(tr => [tr.dataset.status, Number(tr.querySelector('[data-count]').dataset.count)]))")
    assert {k: v for k, v in counts.items() if v} == dict(run.statuses)
    assert sum(counts.values()) == len(pages)
    groups = Counter({"ok": 0, "fallback": 0, "review": 0, "failed": 0})
    for r in pages:
        groups[{"ok": "ok", "fallback": "fallback", "loop": "review", "truncated": "review", "empty": "review",
                "suspect": "review", "refused": "review"}.get(r["status"], "failed")] += 1
    for g, n in groups.items():
        assert shown(f"n-{g}") == str(n)
    assert shown("q-cer") == f"{_expected_cer(run) * 100:.2f} %"
    assert shown("q-missing") == "1"
    # Charts are inline SVG drawn from the same numbers.
    assert page.eval("document.querySelectorAll('#chart-status rect').length") == len(run.statuses)
    assert page.eval("!!document.getElementById('chart-cer') && !!document.getElementById('chart-attempts')")
    # The document table: loaded on demand, sortable, and the id with markup in it is text.
    page.wait_for("document.getElementById('doc-table').dataset.loaded === '1'")
    assert page.eval("document.querySelectorAll('#doc-table tbody tr').length") == 5
    assert page.eval("[...document.querySelectorAll('#doc-table tbody td:first-child a')].map(a => a.textContent)") \
        == sorted(["alpha", "beta", "gamma", XSS_DOC, "omega"])
    page.eval("document.querySelector('#doc-table th[data-col=pages]').click()")
    assert page.eval("document.querySelector('#doc-table tbody td:first-child a').textContent") == "alpha"
    assert page.eval("document.querySelector('#doc-table th[data-col=pages]').getAttribute('aria-sort')") == "descending"
    page.eval("document.querySelector('#doc-table th[data-col=pages]').click()")
    assert page.eval("document.querySelector('#doc-table th[data-col=pages]').getAttribute('aria-sort')") == "ascending"
    page.eval("const f = document.getElementById('doc-filter'); f.value = 'gam'; f.dispatchEvent(new Event('input'))")
    assert page.eval("document.querySelectorAll('#doc-table tbody tr').length") == 1
    assert page.eval("document.querySelectorAll('img[src=\"x\"]').length") == 0
    assert page.eval("document.title") == "vlmocr report: run"


@pytest.mark.browser
def test_keyboard_review_and_markup_in_ocr_text_stays_text(flagged, page, tmp_path: Path) -> None:
    run, out, _ = flagged
    page.goto(_url(out / "review.html", "q=all&n=0"))
    def at() -> list[str]:
        return page.wait_for(
            "document.getElementById('page-title') && [document.getElementById('pos-n').textContent, "
            "document.getElementById('doc-id').textContent, document.getElementById('page-no').textContent]")

    def wait_at(n: int) -> list[str]:
        page.wait_for(f"document.getElementById('pos-n') && document.getElementById('pos-n').textContent === '{n}'")
        return at()

    assert at() == ["1", "alpha", "page 2"]
    assert page.eval("document.getElementById('pos-total').textContent") == "8"
    assert page.eval("document.getElementById('f-status').textContent") == "loop"
    assert page.eval("document.getElementById('f-finish').textContent") == "length"
    assert "2 records of this page" in page.eval("document.getElementById('f-attempt').textContent")
    assert page.eval("document.getElementById('text-clean').textContent") == "the the"
    page.press("j")
    assert wait_at(2) == ["2", "alpha", "page 3"]
    page.press("ArrowRight")
    assert wait_at(3) == ["3", "alpha", "page 4"]
    page.press("k")
    assert wait_at(2)[2] == "page 3"
    page.press("j")
    page.press("j")
    assert wait_at(4) == ["4", "alpha", "page 5"]
    assert page.eval("location.hash") == "#q=all&n=3"

    # The XSS page: shown as text, nothing ran.
    rec = run.finals[("alpha", 5)]
    assert page.eval("document.getElementById('text-raw').textContent") == rec["text"]
    assert page.eval("document.getElementById('text-raw').children.length") == 0
    assert XSS in page.eval("document.body.innerText")
    assert page.eval("document.querySelectorAll('img[src=\"x\"]').length") == 0
    assert page.eval("[...document.scripts].map(s => s.getAttribute('src'))") == ["assets/report.js"]
    title = page.eval("document.title")
    assert title.startswith("Review 4/8") and "pwned" not in title
    assert page.eval("document.getElementById('f-status').textContent") == "truncated"
    assert page.eval("document.getElementById('f-flags').textContent") == "truncated"
    assert page.eval("document.querySelectorAll('#diff del, #diff ins').length") > 0
    assert page.eval("document.getElementById('f-cer').textContent").startswith(
        f"{char_errors(rec['text'], 'Alpha page 5')[0] / len('Alpha page 5') * 100:.2f} %")
    page.wait_for("document.getElementById('page-img').complete && document.getElementById('page-img').naturalWidth > 0")
    shot = page.screenshot(tmp_path / "review-xss.png")
    assert shot.stat().st_size > 10_000
    if os.environ.get("VLMOCR_SCREENSHOT_DOCS") == "1":
        page.screenshot(SCREENSHOT_DOC)

    # On to the document whose id carries an onerror handler, then to the end of the queue.
    for n in (5, 6, 7):
        page.press("j")
        wait_at(n)
    assert at() == ["7", XSS_DOC, "page 1"]
    assert page.eval("document.getElementById('no-img').textContent").startswith("no thumbnail: source not found")
    page.press("End")
    assert wait_at(8)[1:] == ["gamma", "page 1"]
    assert page.eval("document.getElementById('reasons').textContent") == "ok CER > threshold"
    page.press("j")  # at the end: stays
    time.sleep(0.2)
    assert at()[0] == "8"
    assert page.dialogs == [] and page.eval("document.title").startswith("Review 8/8")

    # Defence in depth: the page's policy refuses inline script, so even markup that got into
    # the DOM could not run.
    page.eval("window.__violations = 0; document.addEventListener('securitypolicyviolation', () => window.__violations++);"
              "const s = document.createElement('script'); s.textContent = \"document.title = 'inline ran'\";"
              "document.head.append(s); const i = document.createElement('img');"
              "i.setAttribute('onerror', \"document.title = 'handler ran'\"); i.src = 'x'; document.body.append(i); 1")
    page.wait_for("window.__violations >= 2")
    assert page.eval("document.title").startswith("Review 8/8")
    page.log_entries.clear()  # the two refusals are logged as errors; they are the point here
    page.console_errors.clear()
    page.eval("document.querySelectorAll('img[src=\"x\"]').forEach(i => i.remove()); 1")

    # A queue of one status, chosen by URL.
    page.eval("location.hash = 'q=bad_input&n=0'")
    page.wait_for("document.getElementById('pos-total') && document.getElementById('pos-total').textContent === '1'")
    assert at()[1:] == ["beta", "whole document"]
    assert page.eval("document.getElementById('f-error').textContent") == "file not found: beta.pdf"


@pytest.mark.browser
def test_document_view_from_the_table(flagged, page) -> None:
    run, out, _ = flagged
    page.goto(_url(out / "index.html"))
    page.wait_for("document.getElementById('doc-table').dataset.loaded === '1'")
    href = page.eval("document.querySelector('#doc-table tbody td:first-child a').getAttribute('href')")
    assert href.startswith("doc.html#d=0&")
    page.goto(_url(out / "doc.html", href.split("#", 1)[1]))
    page.wait_for("document.getElementById('doc-title') && document.getElementById('doc-title').textContent === 'alpha'")
    assert page.eval("document.querySelectorAll('.page-card').length") == 6
    texts = page.eval("[...document.querySelectorAll('.page-card pre[id^=text-]')].map(p => p.textContent)")
    assert texts == [run.finals[("alpha", p)]["text"] for p in range(1, 7)]
    assert page.eval("document.querySelectorAll('.page-card img').length") == 5  # flagged pages only
    assert page.eval("document.querySelectorAll('img[src=\"x\"]').length") == 0
    assert "pwned" not in page.eval("document.title")
    # "review" on page 5 leads into the queue at that page.
    link = page.eval("[...document.querySelectorAll('.page-card h3 a')].map(a => a.getAttribute('href'))")
    assert link == [f"review.html#q=all&n={n}" for n in range(5)]


@pytest.mark.browser
def test_each_page_shows_the_language_it_was_read_as(tmp_path: Path, page) -> None:
    """Issue 27, point 3: the report showed `lang eng` (the run's setting) for pages read as dan and
    frk. Every record names the language its page was read as and where that came from (a person's
    manifest column, triage's suggestion, the run's default); the report shows it per document, per
    page and for the run."""
    import csv

    lines = {"dansk": ["Kaere Hr. Jensen, tak for Deres brev af den femte maj.", "Vi sender bogerne i morgen."],
             "fraktur": ["Der Hauptmann befahl den Abmarsch der Kompanie.", "Die Bruecke war gesprengt worden."],
             "english": ["Dear Sir, thank you for the books which arrived.", "We shall pay by the end of the month."]}
    for name, text in lines.items():
        make_text_pdf(tmp_path / f"{name}.pdf", [text])
    manifest = tmp_path / "m.csv"
    with manifest.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["doc_id", "path", "language", "language_from"])
        w.writerows([["dansk", tmp_path / "dansk.pdf", "dan", ""], ["fraktur", tmp_path / "fraktur.pdf", "frk", "triage"],
                     ["english", tmp_path / "english.pdf", "", ""]])
    run = tmp_path / "run"
    proc = run_cli("run", "--manifest", str(manifest), "--out", str(run), "--engine", "textlayer")
    assert proc.returncode in (0, 2), proc.stderr
    read = {r["doc_id"]: (r["language"], r["language_from"]) for r in iter_records(run / PAGES_FILE)}
    assert read == {"dansk": ("dan", "manifest"), "fraktur": ("frk", "triage"), "english": ("eng", "default")}
    # Truth that differs flags the English page, so the review queue shows its facts.
    truth = tmp_path / "truth.csv"
    truth.write_text("doc_id,page,text\nenglish,1,Something else entirely\n", encoding="utf-8")
    out = tmp_path / "report"
    assert run_cli("report", str(run), "--out", str(out), "--truth", str(truth)).returncode == 0
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "<th>pages read as</th><td>dan 1, eng 1, frk 1</td>" in index
    assert "<th>lang (run setting)</th><td>eng</td>" in index
    page.goto(_url(out / "index.html"))
    page.wait_for("document.getElementById('doc-table').dataset.loaded === '1'")
    langs = page.eval("Object.fromEntries([...document.querySelectorAll('#doc-table tbody tr')].map(tr => "
                      "[tr.querySelector('td a').textContent, tr.children[1].textContent]))")
    assert langs == {"dansk": "dan", "fraktur": "frk", "english": "eng"}
    page.goto(_url(out / "review.html", "q=all&n=0"))
    page.wait_for("!!document.getElementById('f-language')")
    assert page.eval("document.getElementById('f-language').textContent") == "eng (default); judged by the en word list"


# ------------------------------------------------------------------------------ a large run

LARGE_DOCS, LARGE_PAGES = 400, 50  # 20 000 pages


@pytest.fixture(scope="module")
def large_report(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("large")
    pdf = make_text_pdf(root / "book.pdf", [[f"Page {n}", "Lorem ipsum dolor sit amet."] for n in range(1, 51)])
    run = root / "run"
    n = write_large_run(run, pdf, docs=LARGE_DOCS, pages_per_doc=LARGE_PAGES)
    out = root / "report"
    t0 = time.monotonic()
    result = build_report(ReportOptions(run, out, thumb_size=200, max_thumbs=40, workers=2))
    return n, out, result, time.monotonic() - t0


@pytest.mark.slow
def test_large_run_builds_fast_and_stays_small(large_report) -> None:
    n, out, result, seconds = large_report
    assert n == result.pages == LARGE_DOCS * LARGE_PAGES == 20_000
    assert seconds < 120, f"report of 20 000 pages took {seconds:.1f} s"
    flagged = sum(1 for i in range(n) if i % 37 == 0)
    assert result.flagged == flagged
    assert result.thumbs == 40 and result.thumbs_skipped == flagged - 40
    index = (out / "index.html").stat().st_size
    assert index < 2_000_000, f"index.html is {index} bytes"
    assert index < 200_000  # only summaries: a few charts and the first flagged pages
    assert (out / "data" / "docs.js").stat().st_size < 200_000
    chunks = list((out / "data" / "c").glob("*.js"))
    assert len(chunks) == 200
    assert max(c.stat().st_size for c in chunks) < 2_000_000
    assert len(list((out / "thumbs").glob("*.jpg"))) == 40


@pytest.mark.slow
@pytest.mark.browser
def test_large_run_opens_fast(large_report, page) -> None:
    _n, out, result, _ = large_report
    seconds = page.goto(_url(out / "index.html"))
    assert seconds < 10
    assert page.eval("document.getElementById('n-pages').textContent") == "20,000"
    page.wait_for("document.getElementById('doc-table').dataset.loaded === '1'")
    assert page.eval("document.getElementById('doc-count').textContent") == "400 of 400 documents"
    assert page.eval("document.querySelectorAll('#doc-table tbody tr').length") == 100
    assert page.eval("document.querySelectorAll('img').length") == 0
    page.eval("document.getElementById('doc-next').click()")
    assert page.eval("document.querySelector('#doc-table tbody td:first-child a').textContent") == "book-00100"
    # The review opens at its last page without loading the rest.
    t0 = time.monotonic()
    page.goto(_url(out / "review.html", f"q=all&n={result.flagged - 1}"))
    page.wait_for(f"document.getElementById('pos-n') && document.getElementById('pos-n').textContent === "
                  f"'{result.flagged}'")
    assert time.monotonic() - t0 < 10
    assert page.eval("document.getElementById('doc-id').textContent") == "book-00399"
    assert page.eval("document.getElementById('no-img').textContent").startswith("no thumbnail: the report renders")
    assert page.eval("performance.getEntriesByType('resource').filter(r => r.name.includes('/data/')).length") <= 4
    page.press("k")
    page.wait_for(f"document.getElementById('pos-n').textContent === '{result.flagged - 1}'")
    # A document view in the middle of the run.
    page.goto(_url(out / "doc.html", f"d=200&g={200 * LARGE_PAGES}&o=0"))
    page.wait_for("document.getElementById('doc-title') && document.getElementById('doc-title').textContent === "
                  "'book-00200'")
    assert page.eval("document.querySelectorAll('.page-card').length") == 50


def test_settings_show_the_workers_the_run_started_not_the_setting():
    """run.json's `workers` block (machine.py) is what ran: memory may hold fewer than
    the cores the setting names."""
    from vlmocr.report.html_pages import _settings_table

    info = {"settings": {"engine": "auto", "workers": 8},
            "workers": {"count": 3, "cores": 8, "reason": "memory: 4700 MB available hold 3 worker(s), fewer than the 8 cores"}}
    html = _settings_table(info)
    assert "<th>workers</th><td>3 (memory: 4700 MB available hold 3 worker(s), fewer than the 8 cores)</td>" in html
    assert "<td>8</td>" not in html
    assert "<th>workers</th><td>8</td>" in _settings_table({"settings": {"workers": 8}})  # older runs

"""`vlmocr publish`: complete documents only, atomic per document, idempotent, serialised — with
real runs (`vlmocr run --engine textlayer`), real SQLite, real files and real processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import publish_cli, run_cli, textlayer_run
from support.documents import make_doc
from support.library import catalog_rows, snapshot
from support.records import finals_by_doc
from support.runs import drop_records
from vlmocr.inputs.sources import discover
from vlmocr.library import Catalog, LibraryLock, library_holds, skip_held
from vlmocr.library.publish import publish
from vlmocr.library.runs import PAGE_SEPARATOR
from vlmocr.runfolder.store import checked_line


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("corpus")
    src = root / "src"
    make_doc(src, "paper.pdf", 1, 3, extra={
        1: ["A Study of Rivers", "doi:10.5555/rivers.2020.001", "arXiv:2003.01234v2 [physics.geo-ph]"],
        3: ["References", "[1] Smith, doi:10.1111/cited.work ISBN 0-306-40615-2"],
    })
    make_doc(src, "book.pdf", 2, 2, extra={2: ["Printed in Germany", "ISBN 978-3-16-148410-0"]})
    make_doc(src, "notes.pdf", 3, 1)
    run = root / "run"
    textlayer_run(run, src)
    return {"root": root, "src": src, "run": run}


def test_publish_catalog_and_folders(corpus, tmp_path):
    lib = tmp_path / "lib"
    code, out = publish_cli(str(corpus["run"]), "--library", str(lib))
    assert code == 0, out
    assert out["counts"]["published"] == 3 and out["documents_in_library"] == 3
    finals = finals_by_doc(corpus["run"])
    with Catalog(lib, readonly=True) as cat:
        rows = {r["doc_id"]: r for r in cat.documents()}
        assert set(rows) == {"paper", "book", "notes"}
        paper = rows["paper"]
        sha = __import__("hashlib").sha256((corpus["src"] / "paper.pdf").read_bytes()).hexdigest()
        assert paper["sha256"] == sha and paper["lib_id"] == f"paper--{sha[:12]}"
        assert paper["original_name"] == "paper.pdf" and paper["pages"] == 3 and paper["doc_pages"] == 3
        assert paper["statuses"] == {"ok": 3} and paper["ok_pages"] == 3 and paper["layer"] == "raw"
        assert paper["run"] == str(corpus["run"].resolve()) and paper["engines"] == ["textlayer"]
        assert paper["settings_key"] == finals["paper"][0]["key"]
        assert paper["provenance"]["settings"]["engine"] == "textlayer" and paper["provenance"]["versions"]
        assert paper["text_sha256"] and paper["path"] == f"docs/{paper['lib_id']}"
        idents = {(i["type"], i["value"]): i for i in cat.identifiers(paper["lib_id"])}
        # The reference list (page 3) gives nothing: only the paper's own identifiers.
        assert set(idents) == {("doi", "10.5555/rivers.2020.001"), ("arxiv", "2003.01234")}
        assert idents[("doi", "10.5555/rivers.2020.001")]["page"] == 1
        assert "doi:10.5555/rivers.2020.001" in idents[("doi", "10.5555/rivers.2020.001")]["snippet"]
        assert [(i["type"], i["value"]) for i in cat.identifiers(rows["book"]["lib_id"])] == [("isbn", "9783161484100")]
        assert cat.check() == []
    # Each document keeps its text, Markdown and page records, equal to the run's final records.
    for doc_id, recs in finals.items():
        folder = lib / rows[doc_id]["path"]
        pages = [json.loads(x) for x in (folder / "pages.jsonl").read_text(encoding="utf-8").splitlines()]
        assert pages == recs
        text = (folder / "document.txt").read_text(encoding="utf-8")
        assert text.split(PAGE_SEPARATOR) == [r["text"] for r in recs]
        md = (folder / "document.md").read_text(encoding="utf-8")
        assert md.count("<!-- page ") == len(recs) and "| ok | textlayer -->" in md
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        assert meta["content_sha256"] == rows[doc_id]["content_sha256"]
        for span in meta["page_spans"]:
            assert text[span["start"]:span["end"]] == recs[span["page"] - 1]["text"]
    assert not list((lib / "staging").iterdir())


def test_publishing_twice_changes_nothing(corpus, tmp_path):
    lib = tmp_path / "lib"
    assert publish_cli(str(corpus["run"]), "--library", str(lib))[0] == 0
    before = snapshot(lib)
    time.sleep(0.05)
    code, out = publish_cli(str(corpus["run"]), "--library", str(lib))
    assert code == 0 and out["counts"]["unchanged"] == 3 and out["counts"]["published"] == 0
    after = snapshot(lib)
    assert {k: v for k, v in after.items() if k != ".lock"} == {k: v for k, v in before.items() if k != ".lock"}


def test_partial_run_is_reported_then_published_once_completed(corpus, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(corpus["run"], partial)
    drop_records(partial, "paper", {2, 3})
    lib = tmp_path / "lib"
    code, out = publish_cli(str(partial), "--library", str(lib))
    assert code == 1  # ExitCode.incomplete: resubmit the run
    by_doc = {d["doc_id"]: d for d in out["documents"]}
    assert by_doc["paper"]["action"] == "incomplete" and "2 of 3 page(s) without a record" in by_doc["paper"]["detail"]
    assert {by_doc["book"]["action"], by_doc["notes"]["action"]} == {"published"}
    assert catalog_rows(lib, "SELECT count(*) FROM documents WHERE doc_id='paper'") == [(0,)]
    assert not list((lib / "docs").glob("paper--*"))

    # A second copy, resumed by the real `vlmocr run`, reads the missing pages: now it publishes,
    # and the paper is no longer reported as a failure.
    resumed = tmp_path / "resumed"
    shutil.copytree(partial, resumed)
    textlayer_run(resumed, corpus["src"])
    code, out = publish_cli(str(partial), str(resumed), "--library", str(lib))
    assert code == 0, out
    by_doc = {d["doc_id"]: d for d in out["documents"]}
    assert by_doc["paper"]["action"] == "published" and by_doc["paper"]["run"] == str(resumed.resolve())
    assert out["counts"]["incomplete"] == 0
    # The stale partial run alone: the library holds the paper, so it is not a failure either.
    code, out = publish_cli(str(partial), "--library", str(lib))
    assert code == 0 and {d["doc_id"]: d["action"] for d in out["documents"]}["paper"] == "held"


def test_error_pages_and_unreadable_documents_are_not_complete(corpus, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(corpus["run"], run)
    lines = (run / "pages.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        if r["doc_id"] == "book" and r["page"] == 2:
            r["status"], r["text"] = "error", ""  # read again on resume: not final
    recs.append({**recs[0], "doc_id": "broken", "source": "/nonexistent/broken.pdf", "page": 0, "doc_pages": None,
                 "status": "bad_input", "text": "", "error": "corrupt or not a PDF"})
    (run / "pages.jsonl").write_bytes(b"".join(checked_line(r) for r in recs))  # as the writer would
    result = publish([run], tmp_path / "lib")
    actions = {o.doc_id: (o.action, o.detail) for o in result.outcomes}
    assert actions["book"][0] == "incomplete" and "status error" in actions["book"][1]
    assert actions["broken"][0] == "unreadable" and "corrupt" in actions["broken"][1]
    assert actions["paper"][0] == actions["notes"][0] == "published"
    assert int(result.exit_code()) == 1


def test_better_version_replaces_worse_is_kept_and_layer_clean(corpus, tmp_path):
    lib = tmp_path / "lib"
    worse = tmp_path / "worse"
    shutil.copytree(corpus["run"], worse)
    recs = [json.loads(x) for x in (worse / "pages.jsonl").read_text().splitlines()]
    for r in recs:
        if r["doc_id"] == "notes":
            r["status"], r["text"] = "empty", ""
    (worse / "pages.jsonl").write_bytes(b"".join(checked_line(r) for r in recs))  # as the writer would
    first = publish([worse], lib)
    assert {o.doc_id: o.action for o in first.outcomes}["notes"] == "published"
    folder = next((lib / "docs").glob("notes--*"))
    second = publish([corpus["run"]], lib)
    assert {o.doc_id: o.action for o in second.outcomes} == {"notes": "updated", "paper": "unchanged",
                                                             "book": "unchanged"}
    assert json.loads((folder / "pages.jsonl").read_text().splitlines()[0])["status"] == "ok"
    third = publish([worse], lib)
    assert {o.doc_id: o.action for o in third.outcomes}["notes"] == "kept"
    # The cleaned layer, by option: recorded in the catalog (same rank, so --replace).
    clean = publish([corpus["run"]], lib, layer="clean", replace=True)
    assert {o.action for o in clean.outcomes} == {"updated"}
    assert {r[0] for r in catalog_rows(lib, "SELECT layer FROM documents")} == {"clean"}
    assert all(r[0] for r in catalog_rows(lib, "SELECT clean_rules FROM documents"))
    assert "clean" in json.loads((folder / "pages.jsonl").read_text().splitlines()[0])
    with Catalog(lib, readonly=True) as cat:
        assert cat.count() == 3


def test_shards_of_a_slurm_style_run(corpus, tmp_path):
    big = tmp_path / "big"
    for k in (1, 2):
        textlayer_run(big / "shards" / str(k), corpus["src"], extra=("--shard", f"{k}/2"))
    result = publish([big], tmp_path / "lib")
    assert sorted(o.doc_id for o in result.outcomes if o.action == "published") == ["book", "notes", "paper"]
    assert len(result.runs) == 2 and int(result.exit_code()) == 0


def test_two_publishers_at_once_are_serialised_and_corrupt_nothing(corpus, tmp_path):
    # Two runs over different documents plus one over the same ones: three real processes at once.
    more = tmp_path / "more"
    for i in range(12):
        make_doc(more, f"extra{i:02d}.pdf", 10 + i, 2)
    run_b = tmp_path / "run_b"
    textlayer_run(run_b, more)
    lib = tmp_path / "lib"
    cmd = [sys.executable, "-m", "vlmocr", "publish", "--library", str(lib), "--json"]
    procs = [subprocess.Popen(cmd + [str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (corpus["run"], run_b, corpus["run"])]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    # The two publishers of the same run: one published, the other found everything unchanged.
    same = sorted((r["counts"]["published"], r["counts"]["unchanged"]) for r in (results[0], results[2]))
    assert same == [(0, 3), (3, 0)]
    assert results[1]["counts"]["published"] == 12
    with Catalog(lib) as cat:
        assert cat.check() == []
        rows = list(cat.documents())
    assert len(rows) == 15 and len({r["lib_id"] for r in rows}) == 15
    assert sorted(p.name for p in (lib / "docs").iterdir()) == sorted(r["lib_id"] for r in rows)
    assert not list((lib / "staging").iterdir())
    assert catalog_rows(lib, "SELECT count(*) FROM pages") == [(3 + 2 + 1 + 24,)]
    assert catalog_rows(lib, "SELECT count(*) FROM pages_fts") == [(30,)]


def test_a_held_lock_makes_a_publisher_wait_or_exit_6(corpus, tmp_path):
    lib = tmp_path / "lib"
    lock = LibraryLock(lib)
    lock.acquire()
    try:
        assert run_cli("publish", str(corpus["run"]), "--library", str(lib), "--no-wait").returncode == 6
        waiting = subprocess.Popen([sys.executable, "-m", "vlmocr", "publish", str(corpus["run"]), "--library", str(lib)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)
        assert waiting.poll() is None  # blocked on the lock, nothing written yet
        assert not (lib / "catalog.sqlite").exists()
    finally:
        lock.release()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and "waiting for the library lock" in err and "published=3" in out


def test_library_holds_and_skip_held(corpus, tmp_path):
    lib = tmp_path / "lib"
    assert library_holds(lib)("paper", None) is False  # no library yet: holds nothing
    publish([corpus["run"]], lib)
    holds = library_holds(lib)
    sha = __import__("hashlib").sha256((corpus["src"] / "paper.pdf").read_bytes()).hexdigest()
    assert holds("paper", None) and holds("anything", sha) and not holds("paper", "0" * 64)
    changed = tmp_path / "changed"
    changed.mkdir()
    shutil.copy(corpus["src"] / "book.pdf", changed / "book.pdf")
    make_doc(changed, "paper.pdf", 99, 1)  # same name, different file: must be read
    make_doc(changed, "fresh.pdf", 98, 1)
    keep, held = skip_held(lib, discover([changed]))
    assert [d.doc_id for d in held] == ["book"] and sorted(d.doc_id for d in keep) == ["fresh", "paper"]


def test_a_folder_that_is_not_a_library_is_refused(corpus, tmp_path):
    somebodys = tmp_path / "project"
    (somebodys / "docs").mkdir(parents=True)
    (somebodys / "docs" / "DESIGN.md").write_text("keep me")
    proc = run_cli("publish", str(corpus["run"]), "--library", str(somebodys))
    assert proc.returncode == 3 and "not empty" in proc.stderr
    assert (somebodys / "docs" / "DESIGN.md").read_text() == "keep me"


def test_slurm_shards_name_the_original_files(corpus, tmp_path):
    """A SLURM run's shards read staged symlinks (RUN/staged/0001.pdf); originals.csv names the file."""
    big = tmp_path / "slurm-run"
    staged = big / "staged"
    staged.mkdir(parents=True)
    original = corpus["src"] / "notes.pdf"
    (staged / "0001.pdf").symlink_to(original)
    (staged / "originals.csv").write_text(
        f"kind,doc_id,staged,original,pages,dpi\nbulk,notes,0001.pdf,{original},,\n")
    recs = finals_by_doc(corpus["run"])["notes"]
    shard = big / "shards" / "1"
    shard.mkdir(parents=True)
    (shard / "pages.jsonl").write_text("".join(json.dumps({**r, "source": "0001.pdf"}) + "\n" for r in recs))
    (shard / "run.json").write_text(json.dumps({"keys": [recs[0]["key"]], "settings": {"manifest": str(staged / "bulk.csv")}}))
    result = publish([big], tmp_path / "lib")
    assert [o.action for o in result.outcomes] == ["published"]
    with Catalog(tmp_path / "lib", readonly=True) as cat:
        row = next(cat.documents())
    sha = __import__("hashlib").sha256(original.read_bytes()).hexdigest()
    assert row["original_name"] == "notes.pdf" and row["sha256"] == sha and row["source"] == "0001.pdf"
    assert row["source_path"] == str(original)


def test_leftovers_of_a_killed_publisher_are_tidied(corpus, tmp_path):
    lib = tmp_path / "lib"
    publish([corpus["run"]], lib)
    (lib / "staging" / "paper--0123456789ab.4242").mkdir()  # killed while assembling
    (lib / "staging" / "paper--0123456789ab.4242" / "pages.jsonl").write_text("{}\n")
    (lib / "docs" / "ghost--0123456789ab").mkdir()  # killed between the rename and the commit
    result = publish([corpus["run"]], lib)
    assert sorted(result.repaired) == ["removed docs/ghost--0123456789ab (not in the catalog)",
                                       "removed leftover staging/paper--0123456789ab.4242"]
    assert {o.action for o in result.outcomes} == {"unchanged"}
    assert not list((lib / "staging").iterdir()) and len(list((lib / "docs").iterdir())) == 3

"""`vlmocr merge RUN`: shard run directories → one run directory (RUN/merged). No SLURM needed:
the shard directories are written here as `vlmocr run --shard K/N` writes them; one test also
merges the output of real `vlmocr run --shard` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlmocr.cluster.merge import merge
from vlmocr.exceptions import UsageError
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf


def rec(doc, page, text, status="ok", key="k", at="2026-01-01T00:00:00.000+00:00", source=None, doc_pages=2):
    return {"schema": 1, "doc_id": doc, "source": source or f"{doc}.pdf", "page": page, "doc_pages": doc_pages,
            "key": key, "status": status, "text": text, "engine": "openai", "finished_at": at}


def shard(run: Path, k: str, recs: list[dict], keys=("k",)) -> Path:
    d = run / "shards" / k
    d.mkdir(parents=True)
    (d / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (d / "run.json").write_text(json.dumps({"keys": list(keys)}))
    return d


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_merge_takes_one_final_record_per_page_and_assembles_docs(tmp_path):
    run = tmp_path / "run"
    shard(run, "1", [rec("a", 1, "A1 first", status="error"), rec("a", 2, "A2"),
                     rec("a", 1, "A1", at="2026-01-02T00:00:00.000+00:00"),  # the retry: last record wins
                     rec("x", 1, "old settings", key="other")])  # not under the shard's current key
    shard(run, "2", [rec("b", 1, "B1", doc_pages=1), rec("c", 0, "", status="bad_input", doc_pages=None)])
    shard(run, "10", [rec("d", 1, "D1", doc_pages=1)])
    warnings: list[str] = []
    result = merge(run, warn=warnings.append)
    assert result.shards == ["1", "2", "10"] and warnings == []
    out = lines(run / "merged" / "pages.jsonl")
    assert [(r["doc_id"], r["page"], r["text"], r["shard"]) for r in out] == [
        ("a", 1, "A1", "1"), ("a", 2, "A2", "1"), ("b", 1, "B1", "2"), ("c", 0, "", "2"), ("d", 1, "D1", "10")]
    assert result.statuses == {"ok": 4, "bad_input": 1} and result.docs == 4
    doc_a = (run / "merged" / "docs" / "a.md").read_text()
    assert doc_a.index("<!-- page 1 | ok") < doc_a.index("A1") < doc_a.index("<!-- page 2 | ok") < doc_a.index("A2")
    assert "bad_input" in (run / "merged" / "docs" / "c.md").read_text()
    info = json.loads((run / "merged" / "run.json").read_text())
    assert info["summary"]["ok"] == 4 and info["summary"]["failed"] == 1 and len(info["merged_from"]) == 3
    # The shards are untouched; a second merge replaces the first (no stale documents).
    (run / "shards" / "10" / "pages.jsonl").write_text("")
    merge(run, warn=warnings.append)
    assert not (run / "merged" / "docs" / "d.md").exists()
    assert not list(run.glob(".merged*"))


def test_a_page_in_two_shards_prefers_the_better_status_and_warns_on_different_text(tmp_path):
    run = tmp_path / "run"
    shard(run, "1", [rec("a", 1, "same"), rec("a", 2, "", status="error"), rec("b", 1, "old text")])
    shard(run, "2", [rec("a", 1, "same"), rec("a", 2, "A2"),
                     rec("b", 1, "new text", at="2026-01-03T00:00:00.000+00:00")])
    warnings: list[str] = []
    result = merge(run, warn=warnings.append)
    out = {(r["doc_id"], r["page"]): r for r in lines(run / "merged" / "pages.jsonl")}
    assert len(out) == 3 and result.duplicates == 3
    assert out[("a", 2)]["text"] == "A2" and out[("a", 2)]["shard"] == "2"  # ok beats error
    assert out[("b", 1)]["text"] == "new text"  # both ok, different text: the newer, with a warning
    assert result.conflicts == [{"doc_id": "b", "page": 1, "shards": ["1", "2"]}]
    assert len(warnings) == 1 and "b page 1 has different text in shards 1 and 2" in warnings[0]


def test_merge_puts_the_original_names_back(tmp_path):
    run = tmp_path / "run"
    (run / "staged").mkdir(parents=True)
    (run / "staged" / "originals.csv").write_text(
        'kind,doc_id,staged,original,pages,dpi\nbulk,"we ""ird"", name",0001.pdf,"/data/we ""ird"", name.pdf",,\n')
    shard(run, "1", [rec('we "ird", name', 1, "T", source="0001.pdf", doc_pages=1)])
    merge(run, warn=print)
    (r,) = lines(run / "merged" / "pages.jsonl")
    assert r["source"] == '/data/we "ird", name.pdf' and r["staged_source"] == "0001.pdf"


def test_nothing_to_merge_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        merge(tmp_path)
    res = subprocess.run([sys.executable, "-m", "vlmocr", "merge", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 3


def test_merge_of_real_shard_runs_equals_one_unsharded_run(tmp_path):
    corpus = tmp_path / "in"
    corpus.mkdir()
    for d in range(5):
        make_coded_pdf(corpus / f"d{d}.pdf", [10 * d + 1, 10 * d + 2])
    env = {**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}
    with serve_in_process(ServerConfig()) as srv:
        for k in (1, 2, 3):
            res = subprocess.run([sys.executable, "-m", "vlmocr", "run", str(corpus), "--out",
                                  str(tmp_path / "run" / "shards" / str(k)), "--shard", f"{k}/3", "--profile",
                                  "generic", "--endpoint", srv.url, "--workers", "1"],
                                 capture_output=True, text=True, env=env, timeout=120)
            assert res.returncode == 0, res.stderr
    res = subprocess.run([sys.executable, "-m", "vlmocr", "merge", str(tmp_path / "run"), "--json"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["records"] == 10 and summary["docs"] == 5 and summary["duplicates"] == 0
    out = lines(tmp_path / "run" / "merged" / "pages.jsonl")
    assert {(r["doc_id"], r["page"]): r["text"] for r in out} == {
        (f"d{d}", p): expected_text(10 * d + p) for d in range(5) for p in (1, 2)}
    assert len(list((tmp_path / "run" / "merged" / "docs").glob("*.md"))) == 5

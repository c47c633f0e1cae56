"""`vlmocr slurm submit` and `vlmocr slurm grid`: run options checked by the run parser, jobs.json,
complete shards skipped, and real array jobs against the single-node SLURM of scripts/slurm-up.sh,
reading coded PDFs from a test OpenAI server on 127.0.0.1 (the jobs run on this machine, so they
reach it).

Every test in tests/cluster carries the ``slurm`` marker when it uses the ``slurm`` fixture
(conftest); the others run without a cluster."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from support.cli import run_cli
from support.components import REPO
from support.serve_standin import FAKE
from support.slurm import HOSTILE, cli, coded_corpus, no_injection, records, submit_json, write_exe
from vlmocr.cluster.slurm.jobs import SLURM
from vlmocr.cluster.slurm.submit import shard_argv
from vlmocr.exceptions import UsageError
from vlmocr.inputs.sources import derive_doc_id, shard_of
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_pdf, make_coded_png

pytestmark = pytest.mark.timeout(300)


# ================================================================== without SLURM


def test_run_options_pass_through_validated_by_the_run_parser(tmp_path, monkeypatch):
    from vlmocr.cli import _register
    from vlmocr.cli.slurm_cmd import split_run_args

    _register()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text("")
    paths, args = split_run_args(["a.pdf", "--profile", "generic", "--dpi=150", "dir/", "--force",
                                  "--lang", "deu+eng", "--config", "c.toml"])
    assert paths == ["a.pdf", "dir/"]
    assert args[args.index("--profile") + 1] == "generic"
    assert args[args.index("--dpi") + 1] == "150.0" and "--force" in args
    assert args[args.index("--lang") + 1] == "deu+eng" and args[args.index("--config") + 1] == str(tmp_path / "c.toml")
    with pytest.raises(UsageError, match="--shard is set by"):
        split_run_args(["--shard", "1/2"])
    with pytest.raises(UsageError, match="No such option"):
        split_run_args(["--no-such-option"])
    with pytest.raises(UsageError):
        split_run_args(["--dpi", "many"])


def test_a_triage_suggested_language_stays_a_suggestion_when_staged(tmp_path):
    """The staged manifest the shards read carries where a language came from: a language triage
    suggested (`vlmocr manifest --triage`) staged as a person's word would have had
    wrong_language judge every page by it on the cluster only."""
    from vlmocr.cluster.slurm.submit import stage_documents, staged_documents

    coded_corpus(tmp_path / "in", docs=3, pages=1)
    files = sorted((tmp_path / "in").iterdir())
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path,language,language_from\n"
                        f"a,{files[0]},deu,triage\nb,{files[1]},fra,\nc,{files[2]},,\n", encoding="utf-8")
    stage_documents(tmp_path / "run", "bulk", manifest=manifest)
    docs = {d.doc_id: (d.language, d.language_from) for d in staged_documents(tmp_path / "run", "bulk")}
    assert docs == {"a": ("deu", "triage"), "b": ("fra", ""), "c": (None, "")}
    # A person's mark that a document is hard for the CPU (a VLM tier reads it) is staged too.
    manifest.write_text(f"doc_id,path,hard\na,{files[0]},handwriting\nb,{files[1]},\n", encoding="utf-8")
    stage_documents(tmp_path / "run2", "bulk", manifest=manifest)
    assert {d.doc_id: d.hard for d in staged_documents(tmp_path / "run2", "bulk")} == {"a": "handwriting", "b": ""}


def test_a_vlm_tier_job_after_a_run_that_holds_no_records_is_refused_before_staging(tmp_path):
    coded_corpus(tmp_path / "in", docs=1, pages=1)
    (tmp_path / "cpu").mkdir()
    run = tmp_path / "run"
    res = cli("slurm", "submit", str(tmp_path / "in"), "--out", str(run), "--shards", "2", "--engine", "tesseract",
              "--vlm-tier", "--endpoint", "http://127.0.0.1:9/v1", "--cpu-tiers-from", str(tmp_path / "cpu"),
              cwd=tmp_path)
    assert res.returncode == 3 and "no page records there" in res.stderr, res.stderr
    assert not run.exists()


def test_a_shard_ending_with_review_pages_is_complete_when_a_cpu_engine_read_them(tmp_path):
    """Exit 2 (pages for review): a VLM's review page may owe a retry ladder a resubmission climbs;
    a CPU engine's (or a cascade's, its reader a CPU engine) is read no better again."""
    from vlmocr.cluster.slurm.submit import complete_shards
    from vlmocr.runfolder.rundir import RunDir

    run = tmp_path / "run"
    RunDir(run).staged.mkdir(parents=True)
    (RunDir(run).staged / "bulk.csv").write_text("doc_id,path\n")
    time.sleep(0.01)
    for k, (code, reader) in enumerate([(2, "tesseract"), (2, "openai"), (1, "tesseract"), (9, "openai"),
                                        (2, None)], 1):
        shard = RunDir(run).shard(k).path
        shard.mkdir(parents=True)
        (shard / "run.json").write_text(json.dumps({
            "summary": {"exit_code": code}, "key_material": {"reader": reader} if reader else {},
            "current": {"argv": shard_argv(run, k, 5, ["--engine", "x"])}}))
    assert complete_shards(run, 5, ["--engine", "x"]) == [1, 4]


def test_submit_records_jobs_and_skips_complete_shards(tmp_path):
    """With a stand-in sbatch: the command submitted, jobs.json, and a resubmission that leaves
    out a shard already complete under the same command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    write_exe(bin_dir / "sbatch", f"""#!{sys.executable}
import json, os, sys
n = sum(1 for _ in open({str(log)!r})) if os.path.exists({str(log)!r}) else 0
open({str(log)!r}, "a").write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
print(9000 + n)
""")
    write_exe(bin_dir / "squeue", "#!/bin/sh\nexit 0\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    coded_corpus(tmp_path / "in", docs=4, pages=1)
    run = tmp_path / "run"
    args = ("slurm", "submit", str(tmp_path / "in"), "--out", str(run), "--shards", "2", "--json",
            "--profile", "generic", "--endpoint", "http://127.0.0.1:9/v1")
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout)
    assert first["job_id"] == "9000" and first["array"] == "1-2"
    call = json.loads(log.read_text().splitlines()[0])
    assert call == {"argv": ["--parsable", "bulk.sbatch"], "cwd": str(run / "slurm")}
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())["jobs"]
    assert [(j["kind"], j["job_id"], j["shards"]) for j in jobs] == [("bulk", "9000", 2)]
    # Shard 1 finished cleanly under exactly this command: a resubmission leaves it out.
    shard1 = run / "shards" / "1"
    shard1.mkdir(parents=True)
    (shard1 / "run.json").write_text(json.dumps({
        "summary": {"exit_code": 0},
        "current": {"argv": shard_argv(run, 1, 2, first["run_args"])}}))
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    second = json.loads(res.stdout)
    assert second["job_id"] == "9001" and second["array"] == "2" and second["skipped_shards"] == [1]
    assert json.loads(log.read_text().splitlines()[1])["argv"] == ["--parsable", "--array=2", "bulk.sbatch"]
    # A different command (another dpi) resubmits every shard.
    res = cli(*args, "--dpi", "100", cwd=tmp_path, env=env)
    assert json.loads(res.stdout)["array"] == "1-2"


# ================================================================== real SLURM


def test_array_of_three_shards_reads_the_whole_manifest(slurm, tmp_path):
    truth = coded_corpus(tmp_path / "in", docs=6, pages=1)
    manifest = tmp_path / "m.csv"
    manifest.write_text("doc_id,path\n" + "".join(f"{d},in/{d}.pdf\n" for d in truth))
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(latency=0.05)) as srv:
        res = submit_json("--manifest", str(manifest), "--out", str(run), "--shards", "3", "--time", "10",
                          "--profile", "generic", "--endpoint", srv.url, "--workers", "1", cwd=tmp_path)
        job = res["job_id"]
        try:
            assert slurm.wait(job, timeout=120) == "COMPLETED", slurm.task_states(job)
        finally:
            subprocess.run(["scancel", job], capture_output=True)
    assert slurm.task_states(job) == {"1": "COMPLETED", "2": "COMPLETED", "3": "COMPLETED"}
    seen: Counter = Counter()
    for k in (1, 2, 3):
        recs = records(run / "shards" / str(k))
        for r in recs:
            assert shard_of(r["doc_id"], 3) == k
            assert r["status"] == "ok" and r["text"] == truth[r["doc_id"]][r["page"]]
            seen[(r["doc_id"], r["page"])] += 1
        log = (run / "slurm" / "logs" / f"{job}_{k}.out").read_text()
        first = log.splitlines()[:4]
        assert first[0].startswith(f"== vlmocr bulk-{k}: job ") and f"(array {job} task {k})" in first[0]
        assert "commit" in first[1] and first[2].startswith("== vlmocr 0.1.0 commit ")
        assert "vlmocr exited 0" in log
    assert set(seen) == {(d, p) for d, pages in truth.items() for p in pages}
    assert max(seen.values()) == 1  # no overlap between shards
    st = cli("slurm", "status", str(run), "--json", cwd=tmp_path)
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["totals"] == {"docs": 6, "pages": 6, "final": 6, "ok": 6, "fallback": 0, "review": 0,
                                "failed": 0, "missing": 0, "bad_inputs": 0}
    assert status["not_started"] == status["from_records"] == []  # every shard's summary.json was read
    assert [r["job"]["state"] for r in status["shards"]] == ["COMPLETED"] * 3
    table = cli("slurm", "status", str(run), cwd=tmp_path).stdout
    assert "final/pages" in table and "6/6" in table
    # Accounting is off here: plain sacct exits 1, the job completion log (sacct -c) answers.
    task_ids = [json.loads((run / "slurm" / "tasks" / f"bulk-{k}.json").read_text())["job_id"] for k in (1, 2, 3)]
    acct = SLURM.finished(task_ids)
    assert {acct[t]["state"] for t in task_ids} == {"COMPLETED"}
    # The same command again: every shard is complete, nothing is submitted.
    again = submit_json("--manifest", str(manifest), "--out", str(run), "--shards", "3", "--time", "10",
                        "--profile", "generic", "--endpoint", srv.url, "--workers", "1", cwd=tmp_path)
    assert again["job_id"] is None and again["skipped_shards"] == [1, 2, 3]


def _wait_lines(path: Path, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        count = path.read_bytes().count(b"\n") if path.exists() else 0
        if count >= n:
            return count
        time.sleep(0.1)
    return count


def _check_interrupted_then_resubmit(slurm, tmp_path, run, srv, submit_args, task_job, shard_total,
                                     some_read: bool = True, complete: tuple[int, ...] = (2,)):
    shard = run / "shards" / "1"
    info = slurm.info(task_job)
    assert info["ExitCode"] == "130:0", info
    recs = records(shard)  # every line parses: no torn record
    counts = Counter((r["doc_id"], r["page"]) for r in recs)
    assert max(counts.values(), default=1) == 1 and len(counts) < shard_total
    assert counts or not some_read
    assert all(r["status"] == "ok" for r in recs)
    summary = json.loads((shard / "run.json").read_text())["summary"]
    assert summary["interrupted"] and summary["exit_code"] == 130
    task = json.loads((run / "slurm" / "tasks" / "bulk-1.json").read_text())
    assert (task["state"], task["exit_code"]) == ("FINISHED", 130)
    # Resubmitting the same command resumes: only the unfinished shard(s) run, and complete.
    srv.configure(latency=0.02)
    again = submit_json(*submit_args, "--time", "10", cwd=tmp_path)
    assert again["skipped_shards"] == list(complete)
    assert again["array"] == ("1" if complete == (2,) else "1-2")
    try:
        assert slurm.wait(again["job_id"], timeout=120) == "COMPLETED"
    finally:
        subprocess.run(["scancel", again["job_id"]], capture_output=True)
    final = Counter((r["doc_id"], r["page"]) for r in records(shard))
    assert len(final) == shard_total and max(final.values()) == 1
    assert json.loads((shard / "run.json").read_text())["summary"]["exit_code"] == 0
    for k in (1, 2):
        recs = records(run / "shards" / str(k))
        assert max(Counter((r["doc_id"], r["page"]) for r in recs).values()) == 1
        assert json.loads((run / "shards" / str(k) / "run.json").read_text())["summary"]["exit_code"] == 0


def _signal_corpus(tmp_path: Path) -> tuple[Path, int]:
    """Documents of which shard 1 of 2 holds many pages and shard 2 a few."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    code = 1
    shard1_pages = 0
    names = [f"doc{i}" for i in range(40)]
    ones = [n for n in names if shard_of(n, 2) == 1][:3]
    twos = [n for n in names if shard_of(n, 2) == 2][:1]
    for name in ones + twos:
        pages = 10 if name in ones else 2
        make_coded_pdf(inputs / f"{name}.pdf", list(range(code, code + pages)))
        code += pages
        if name in ones:
            shard1_pages += pages
    return inputs, shard1_pages


def test_task_signalled_before_its_limit_exits_130_and_resubmit_completes(slurm, tmp_path):
    inputs, total = _signal_corpus(tmp_path)
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(latency=0.5, slots=2)) as srv:
        args = (str(inputs), "--out", str(run), "--shards", "2", "--profile", "generic", "--endpoint", srv.url,
                "--workers", "1", "--concurrency", "2")
        res = submit_json(*args, "--time", "10", cwd=tmp_path)
        job = res["job_id"]
        try:
            n = _wait_lines(run / "shards" / "1" / "pages.jsonl", 3, timeout=60)
            assert n >= 3, slurm.task_states(job)
            # What slurmctld's --signal=B:TERM@lead does at the time limit, delivered now.
            subprocess.run(["scancel", "--batch", "--signal=TERM", f"{job}_1"], check=True, capture_output=True)
            assert slurm.wait(job, timeout=90) in ("FAILED", "COMPLETED")
        finally:
            subprocess.run(["scancel", job], capture_output=True)
        states = slurm.task_states(job)
        assert states == {"1": "FAILED", "2": "COMPLETED"}, states
        task1 = next(r for r in slurm.jobs(job) if r.get("ArrayTaskId") == "1")["JobId"]
        log = (run / "slurm" / "logs" / f"{job}_1.out").read_text()
        assert "SIGTERM: forwarding to vlmocr" in log and "vlmocr exited 130" in log
        _check_interrupted_then_resubmit(slurm, tmp_path, run, srv, args, task1, total)


@pytest.mark.slow
def test_time_limit_signal_from_slurmctld_stops_the_task_cleanly(slurm, tmp_path):
    """The real timer: --time=1 with --signal-lead 50 gets B:TERM 0-30 s after start
    (docs/slurm-testing.md); the task exits 130 before the limit and a resubmit completes it."""
    inputs, total = _signal_corpus(tmp_path)
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(latency=1.5, slots=1)) as srv:
        args = (str(inputs), "--out", str(run), "--shards", "2", "--profile", "generic", "--endpoint", srv.url,
                "--workers", "1", "--concurrency", "1")
        res = submit_json(*args, "--time", "1", "--signal-lead", "50", cwd=tmp_path)
        job = res["job_id"]
        script = (run / "slurm" / "bulk.sbatch").read_text()
        assert "#SBATCH --signal=B:TERM@50" in script and "--stop-grace 25" in script
        try:
            slurm.wait(job, timeout=100)
        finally:
            subprocess.run(["scancel", job], capture_output=True)
        states = slurm.task_states(job)
        assert states["1"] == "FAILED"  # exit 130, before the limit: not TIMEOUT
        # Shard 2 (2 pages) may finish before the signal, or be signalled too (exit 130 as well).
        assert states["2"] in ("COMPLETED", "FAILED") and "TIMEOUT" not in states.values()
        tasks = {r.get("ArrayTaskId"): r for r in slurm.jobs(job)}
        assert all(tasks[k]["ExitCode"] in ("0:0", "130:0") for k in ("1", "2"))
        # slurmctld may signal as early as ~6 s after start: perhaps before the first page.
        _check_interrupted_then_resubmit(slurm, tmp_path, run, srv, args, tasks["1"]["JobId"], total,
                                         some_read=False, complete=(2,) if states["2"] == "COMPLETED" else ())


def test_hostile_file_names_are_staged_and_read(slurm, tmp_path):
    inputs = tmp_path / "in put's $(dir)"
    inputs.mkdir()
    expected = {}
    for i, name in enumerate(HOSTILE):
        make_coded_pdf(inputs / name, [700 + i])
        expected[derive_doc_id(name)] = expected_text(700 + i)
    run = tmp_path / "run `touch PWNED_backtick` $(touch PWNED_dollar) \"x\""
    with serve_in_process(ServerConfig(latency=0.05)) as srv:
        res = submit_json(str(inputs), "--out", str(run), "--shards", "2", "--time", "10", "--profile", "generic",
                          "--endpoint", srv.url, "--workers", "1", cwd=tmp_path)
        job = res["job_id"]
        try:
            assert slurm.wait(job, timeout=120) == "COMPLETED", slurm.task_states(job)
        finally:
            subprocess.run(["scancel", job], capture_output=True)
    got = {}
    for k in (1, 2):
        for r in records(run / "shards" / str(k)):
            assert r["source"].isascii() and r["source"].endswith(".pdf")
            got[r["doc_id"]] = r["text"]
    assert got == expected
    merged = cli("merge", str(run), "--json", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    recs = records(run / "merged")
    assert sorted(r["source"] for r in recs) == sorted(str(inputs / n) for n in HOSTILE)
    assert {r["doc_id"] for r in recs} == set(expected)
    assert sorted(p.name for p in (run / "merged" / "docs").iterdir()) == sorted(f"{d}.md" for d in expected)
    no_injection(tmp_path, REPO)
    assert not (REPO / "PWNED_dollar").exists() and not (REPO / "PWNED_backtick").exists()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_job_log_says_when_its_server_is_ready_and_its_gpu_memory_then_pages_per_second(slurm, tmp_path):
    """Seed 000: "Read the job log for: server ready time, the nvidia-smi memory line,
    pages-per-second lines, …". A task serving its own model (the stand-in server, loading for a
    second; the nvidia-smi stand-in on the job's PATH) writes them in that order, then "Done:"."""
    from support.serve_standin import with_nvidia_smi

    make_coded_pdf(tmp_path / "doc.pdf", [1, 2, 3])
    env = with_nvidia_smi({"PATH": os.environ["PATH"], "VLMOCR_VLLM_BIN": f"{sys.executable} {FAKE}",
                           "FAKE_VLLM_START_DELAY": "1", "FAKE_VLLM_VERSION": "0.11.0"})
    run = tmp_path / "run"
    res = cli("slurm", "submit", str(tmp_path / "doc.pdf"), "--out", str(run), "--shards", "1", "--time", "10",
              "--json", "--serve", "qwen3-vl", "--workers", "1", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    try:
        assert slurm.wait(job, timeout=180) == "COMPLETED", slurm.task_states(job)
    finally:
        subprocess.run(["scancel", job], capture_output=True, check=False)
    lines = (run / "slurm" / "logs" / f"{job}_1.out").read_text().splitlines()

    def first(pattern: str) -> int:
        return next(i for i, line in enumerate(lines) if re.search(pattern, line))

    ready = first(r"^vllm 0\.11\.0 ready in \d+ s at http://127\.0\.0\.1:\d+/v1 serving Qwen/Qwen3-VL-8B-Instruct ")
    assert lines[ready + 1] == "nvidia-smi memory: GPU 0 NVIDIA A100-SXM4-80GB 71234 MiB used of 81920 MiB"
    assert ready + 1 < first(r"\d+\.\d\d pages/s") < first(r"^Done: 3 pages in 1 docs")
    server = json.loads((run / "shards" / "1" / "run.json").read_text())["server"]
    assert server["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB" and server["version"] == "0.11.0"


def test_job_serving_its_own_model_stops_the_server_on_sigterm_and_resumes(slurm, tmp_path):
    """Each task starts its server as on a GPU node (`vlmocr run --serve PROFILE`), here the
    stand-in tests/cluster/fake_vllm through VLMOCR_VLLM_BIN (the job inherits the environment).
    SIGTERM to the batch shell: vlmocr finishes pages in flight, stops the server, exits 130."""
    fake = FAKE
    assert fake.exists(), f"{fake}: the vlmocr serve stand-in is part of the repository"
    make_coded_pdf(tmp_path / "many.pdf", list(range(1, 31)))
    record = tmp_path / "server.json"
    env = {"VLMOCR_VLLM_BIN": f"{sys.executable} {fake}", "FAKE_VLLM_RECORD": str(record),
           "FAKE_VLLM_LATENCY": "0.4", "FAKE_VLLM_WORKER": "1"}
    run = tmp_path / "run"
    args = ("slurm", "submit", str(tmp_path / "many.pdf"), "--out", str(run), "--shards", "1", "--time", "10",
            "--json", "--serve", "qwen3-vl", "--workers", "1", "--concurrency", "2")
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    try:
        assert _wait_lines(run / "shards" / "1" / "pages.jsonl", 2, timeout=90) >= 2, slurm.task_states(job)
        server = json.loads(record.read_text())
        assert server["env"]["HF_HUB_OFFLINE"] == "1"
        subprocess.run(["scancel", "--batch", "--signal=TERM", job], check=True, capture_output=True)
        assert slurm.wait(job, timeout=90) == "FAILED"
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    assert slurm.info(job)["ExitCode"] == "130:0"
    deadline = time.monotonic() + 10
    while not (_gone(server["pid"]) and _gone(server["worker_pid"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(server["pid"]) and _gone(server["worker_pid"]), "the server outlived its job"
    done = Counter((r["doc_id"], r["page"]) for r in records(run / "shards" / "1"))
    assert 2 <= len(done) < 30 and max(done.values()) == 1
    env["FAKE_VLLM_LATENCY"] = "0.01"
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    again = json.loads(res.stdout)["job_id"]
    try:
        assert slurm.wait(again, timeout=120) == "COMPLETED"
    finally:
        subprocess.run(["scancel", again], capture_output=True)
    final = {(r["doc_id"], r["page"]): r for r in records(run / "shards" / "1")}
    assert len(final) == 30 and all(r["text"] == expected_text(p) for (_d, p), r in final.items())
    assert Counter((r["doc_id"], r["page"]) for r in records(run / "shards" / "1")).most_common(1)[0][1] == 1


# ================================================================== grid


def truth_folder(tmp_path: Path) -> Path:
    truth = tmp_path / "truth"
    truth.mkdir()
    for code in (1, 2, 3):
        make_coded_png(truth / f"p{code}.png", code)
        (truth / f"p{code}.txt").write_text(expected_text(code), encoding="utf-8")
    return truth


def test_dry_run_writes_one_grid_job(tmp_path):
    truth = truth_folder(tmp_path)
    res = run_cli("slurm", "grid", "--out", str(tmp_path / "run"), "--time", "1:00:00", "--dry-run", "--json", "--",
                  "--truth", str(truth), "--serve", "qwen3-vl", "--dpi", "150,200", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    script = Path(json.loads(res.stdout)["script"]).read_text()
    assert "#SBATCH --time=1:00:00" in script and "#SBATCH --array" not in script
    assert '-m vlmocr grid --truth' in script and "--serve qwen3-vl --dpi 150,200 --out \"$OUT\"" in script
    assert 'OUT="$RUN_DIR/grid"' in script and "--signal=B:TERM@" in script
    bad = run_cli("slurm", "grid", "--out", str(tmp_path / "run"), "--dry-run", "--", "--serve", "qwen3-vl")
    assert bad.returncode == 3 and "--truth" in bad.stderr


@pytest.mark.slurm
def test_grid_job_loads_the_model_once_and_ranks_every_cell(slurm, tmp_path):
    truth = truth_folder(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {"VLMOCR_VLLM_BIN": f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}", "TMPDIR": str(scratch),
           "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "FAKE_VLLM_RECORD": str(tmp_path / "record.json")}
    run = tmp_path / "run"
    res = run_cli("slurm", "grid", "--out", str(run), "--json", "--", "--truth", str(truth), "--serve", "qwen3-vl",
                  "--engine", "openai", "--longest-side", "800,1200", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)["job_id"]
    state = slurm.wait(job, timeout=240)
    log = "".join(p.read_text(errors="replace") for p in (run / "slurm" / "logs").glob("*"))
    assert state == "COMPLETED", log
    cells = json.loads((run / "grid" / "grid.json").read_text())["cells"]
    assert len(cells) == 2 and all(c["corpus"]["cer"] == 0 and c["exit_code"] == 0 for c in cells), cells
    assert len(list((run / "grid" / "logs").glob("server-*.log"))) == 1  # one server for both cells
    assert not os.path.exists(scratch / "vlmocr-serve")  # nothing left behind by the server

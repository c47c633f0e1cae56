"""`vlmocr slurm submit` and `status`: script generation (no SLURM needed) and real array jobs
against the single-node SLURM of scripts/slurm-up.sh, reading coded PDFs from a test OpenAI
server on 127.0.0.1 (the jobs run on this machine, so they reach it).

Every test in tests/cluster carries the ``slurm`` marker (conftest); those without the ``slurm``
fixture run without a cluster."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support.openai_server import ServerConfig, serve_in_process
from support.pagecode import expected_text, make_coded_pdf

from vlmocr.cluster import slurm as sl
from vlmocr.exceptions import UsageError
from vlmocr.sources import derive_doc_id, shard_of

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
HOSTILE = [
    "two  spaces here.pdf",
    "it's \"quoted\".pdf",
    "$(touch PWNED_dollar).pdf",
    "`touch PWNED_backtick`.pdf",
    "new\nline.pdf",
    "comma,semi;colon.pdf",
    "ümlaut ñ.PDF",
]


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", **(env or {})})


def submit_json(*args: str, cwd: Path) -> dict:
    res = cli("slurm", "submit", *args, "--json", cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def records(run: Path) -> list[dict]:
    path = run / "pages.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]  # every line parses


def coded_corpus(folder: Path, docs: int, pages: int, first_code: int = 1) -> dict[str, dict[int, str]]:
    """`docs` scanned-looking PDFs of `pages` coded pages; returns {doc_id: {page: text}}."""
    folder.mkdir(parents=True, exist_ok=True)
    truth: dict[str, dict[int, str]] = {}
    code = first_code
    for d in range(docs):
        codes = list(range(code, code + pages))
        code += pages
        make_coded_pdf(folder / f"doc{d}.pdf", codes)
        truth[f"doc{d}"] = {p: expected_text(c) for p, c in enumerate(codes, 1)}
    return truth


def write_exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def no_injection(*roots: Path) -> None:
    for root in roots:
        hits = [p for p in root.rglob("PWNED*") if "staged" not in p.parts] if root.exists() else []
        # Staged symlinks and assembled docs legitimately *name* the hostile files; an executed
        # injection would create a plain file called PWNED_dollar / PWNED_backtick somewhere.
        created = [p for p in hits if p.name in ("PWNED_dollar", "PWNED_backtick", "PWNED_lang", "PWNED_run")]
        assert not created, f"command injection: {created}"


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


def test_dry_run_writes_safe_scripts_and_submits_nothing(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i, name in enumerate(HOSTILE):
        make_coded_pdf(inputs / name, [500 + i])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "sbatch-called"
    write_exe(bin_dir / "sbatch", f"#!/bin/sh\ntouch {called}\necho 1\n")
    run = tmp_path / "run $(touch PWNED_run) 'q'"
    res = cli("slurm", "submit", str(inputs), "--out", str(run), "--shards", "3", "--partition", "gpu",
              "--gpus-per-task", "1", "--cpus-per-task", "4", "--time", "4:00:00", "--mem", "32G",
              "--mail-user", "me@example.org", "--max-running", "2", "--dry-run",
              "--", "--profile", "generic", "--endpoint", "http://127.0.0.1:9/v1", "--lang", "$(touch PWNED_lang)",
              cwd=tmp_path, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    assert "dry run" in res.stdout and not called.exists()
    assert not (run / "slurm" / "jobs.json").exists()
    script = (run / "slurm" / "bulk.sbatch").read_text()
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=vlmocr-bulk-run_touch_PWNED_run_q",
        "#SBATCH --array=1-3%2",
        "#SBATCH --output=logs/%A_%a.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --time=4:00:00",
        "#SBATCH --mem=32G",
        "#SBATCH --mail-user=me@example.org",
        "#SBATCH --mail-type=END,FAIL",
        "#SBATCH --signal=B:TERM@120",
    ]
    assert '--shard "$K/$N"' in script and 'N=3' in script
    assert '"$PYTHON" -m vlmocr run --manifest "$MANIFEST" --out "$OUT"' in script
    assert "--lang '$(touch PWNED_lang)'" in script and "--stop-grace 60" in script
    assert "HF_HUB_OFFLINE=1" in script and 'VLLM_CACHE_ROOT="$JOB_TMP/vllm"' in script
    assert "trap on_term TERM" in script and '& \npid=$!' not in script and "wait \"$pid\"" in script
    # No document name reaches the script: only the staged manifest does.
    for name in HOSTILE:
        assert Path(name).stem not in script
    subprocess.run(["bash", "-n", str(run / "slurm" / "bulk.sbatch")], check=True)
    # Staged: ASCII symlinks to the originals, doc ids exactly as `vlmocr run` derives them.
    originals = sl.read_originals(run)
    assert sorted(r["original"] for r in originals) == sorted(str(inputs / n) for n in HOSTILE)
    for r in originals:
        assert r["staged"].isascii() and r["staged"][:4].isdigit()
        assert os.readlink(run / "staged" / r["staged"]) == r["original"]
        assert r["doc_id"] == derive_doc_id(Path(r["original"]).name)
    staged = [d.doc_id for d in sl.staged_documents(run, "bulk")]
    assert sorted(staged) == sorted(derive_doc_id(n) for n in HOSTILE)
    no_injection(tmp_path, REPO)


def test_unsafe_sbatch_values_are_refused(tmp_path):
    for bad in ("a b", "gpu\n#SBATCH --uid=0", "$(id)", "x'y"):
        with pytest.raises(UsageError):
            sl.SlurmOptions(partition=bad).directives()
    with pytest.raises(UsageError):
        sl.SlurmOptions(extra=["--comment=a b"]).directives()
    assert sl.SlurmOptions(extra=["--exclusive", "--nodelist=n[1-3]"]).directives()[-2:] == [
        "--exclusive", "--nodelist=n[1-3]"]


def test_generated_script_runs_vlmocr_and_forwards_sigterm(tmp_path):
    """The batch script run by plain bash as an array task would: argv exactly as planned, hostile
    option values inert, SIGTERM forwarded to vlmocr (here a stand-in) and its exit 130 kept."""
    stub = write_exe(tmp_path / "python-stub", f"""#!{sys.executable}
import json, os, signal, sys, time
if sys.argv[1:3] == ["-m", "vlmocr.cluster.slurm"]:
    print("== versions stub"); sys.exit(0)
json.dump({{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TMPDIR", "VLLM_CACHE_ROOT")}}}},
          open(os.environ["STUB_OUT"], "w"))
def term(*_):
    open(os.environ["STUB_OUT"] + ".term", "w").write("TERM")
    sys.exit(130)
signal.signal(signal.SIGTERM, term)
time.sleep(60)
""")
    run = tmp_path / "run"
    (run / "staged").mkdir(parents=True)
    (run / "slurm").mkdir()
    text = sl.render_script(kind="bulk", run_dir=run, python=str(stub), shards=4,
                            run_args=["--lang", "$(touch PWNED_lang)", "--endpoint", "http://h/v1?a=`id`"],
                            options=sl.SlurmOptions(), submit_dir=tmp_path, commit="abc", job_name="t")
    script = write_exe(run / "slurm" / "bulk.sbatch", text)
    out = tmp_path / "stub.json"
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_ID": "77",
                                            "SLURM_ARRAY_JOB_ID": "70", "STUB_OUT": str(out), "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 20
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    task = json.loads((run / "slurm" / "tasks" / "bulk-2.json").read_text())
    assert task["state"] == "RUNNING" and task["shard"] == 2 and task["job_id"] == "77"
    proc.send_signal(signal.SIGTERM)  # as slurmctld's B:TERM does: only the batch shell
    log, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130, log
    assert (tmp_path / "stub.json.term").read_text() == "TERM"
    got = json.loads(out.read_text())
    assert got["argv"] == ["-m", "vlmocr", "run", "--manifest", str(run / "staged" / "bulk.csv"), "--out",
                           str(run / "shards" / "2"), "--shard", "2/4", "--lang", "$(touch PWNED_lang)",
                           "--endpoint", "http://h/v1?a=`id`"]
    assert got["env"]["HF_HUB_OFFLINE"] == "1"
    assert got["env"]["TMPDIR"].startswith(str(tmp_path / "vlmocr-77."))
    assert got["env"]["VLLM_CACHE_ROOT"] == got["env"]["TMPDIR"] + "/vllm"
    assert not Path(got["env"]["TMPDIR"]).exists()  # per-job cache removed at exit
    assert "SIGTERM: forwarding to vlmocr" in log and "vlmocr exited 130: interrupted" in log
    task = json.loads((run / "slurm" / "tasks" / "bulk-2.json").read_text())
    assert (task["state"], task["exit_code"]) == ("FINISHED", 130)
    no_injection(tmp_path)


@pytest.mark.parametrize("when", ["while the shell prepares", "while Python starts"])
def test_a_signal_before_vlmocr_listens_is_passed_on_to_record_an_interrupted_run(tmp_path, when):
    """SIGTERM while the batch shell is still preparing (here: during the versions step), or
    after it launched vlmocr but before Python has a handler (a signal then would kill it), must
    not end the task without a record: the shell writes VLMOCR_STOP_FILE instead of signalling,
    vlmocr reads it, records an interrupted run and exits 130; it is never signalled."""
    started = tmp_path / "started"
    stub = write_exe(tmp_path / "python-stub", f"""#!{sys.executable}
import json, os, signal, sys, time
preparing = {when == "while the shell prepares"!r}
if sys.argv[1:3] == ["-m", "vlmocr.cluster.slurm"]:
    if preparing:
        open({str(started)!r}, "w").close()
        time.sleep(1.5)
    sys.exit(0)
if not preparing:
    open({str(started)!r}, "w").close()
    time.sleep(1.5)  # Python's start-up: no SIGTERM handler yet, a signal now would kill this
signal.signal(signal.SIGTERM, lambda *_: open(os.environ["STUB_OUT"] + ".term", "w").write("TERM"))
stop = os.path.exists(os.environ["VLMOCR_STOP_FILE"])
json.dump({{"stop": stop}}, open(os.environ["STUB_OUT"], "w"))
time.sleep(0.5)
sys.exit(130 if stop else 0)
""")
    run = tmp_path / "run"
    (run / "staged").mkdir(parents=True)
    (run / "slurm").mkdir()
    text = sl.render_script(kind="bulk", run_dir=run, python=str(stub), shards=2, run_args=[],
                            options=sl.SlurmOptions(), submit_dir=tmp_path, commit="abc", job_name="t")
    script = write_exe(run / "slurm" / "bulk.sbatch", text)
    out = tmp_path / "stub.json"
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_ID": "78",
                                            "STUB_OUT": str(out), "TMPDIR": str(tmp_path)})
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    log, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130, log
    said = "signalled before vlmocr started" if when == "while the shell prepares" else "it will read the stop request"
    assert said in log and "vlmocr exited 130: interrupted" in log
    assert json.loads(out.read_text()) == {"stop": True}
    assert not (tmp_path / "stub.json.term").exists()
    task = json.loads((run / "slurm" / "tasks" / "bulk-1.json").read_text())
    assert (task["state"], task["exit_code"]) == ("FINISHED", 130)


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
        "current": {"argv": sl.shard_argv(run, 1, 2, first["run_args"])}}))
    res = cli(*args, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    second = json.loads(res.stdout)
    assert second["job_id"] == "9001" and second["array"] == "2" and second["skipped_shards"] == [1]
    assert json.loads(log.read_text().splitlines()[1])["argv"] == ["--parsable", "--array=2", "bulk.sbatch"]
    # A different command (another dpi) resubmits every shard.
    res = cli(*args, "--dpi", "100", cwd=tmp_path, env=env)
    assert json.loads(res.stdout)["array"] == "1-2"


def test_status_falls_back_to_the_task_files_and_sacct_c(tmp_path):
    """squeue has forgotten the jobs (MinJobAge); a task killed without its end record is looked
    up in sacct, and with accounting off (sacct exits 1) in the completion log (sacct -c)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_exe(bin_dir / "squeue", "#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n")
    write_exe(bin_dir / "sacct", """#!/bin/sh
case " $* " in
  *" -c "*) echo "31|vlmocr-bulk-run|TIMEOUT|0:0|00:01:30" ;;
  *) echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1 ;;
esac
""")
    coded_corpus(tmp_path / "in", docs=3, pages=1)
    run = tmp_path / "run"
    sl.stage_documents(run, "bulk", [str(tmp_path / "in")])
    sl.record_job(run, {"kind": "bulk", "job_id": "30", "array": "1-2", "shards": 2})
    tasks = run / "slurm" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "bulk-1.json").write_text(json.dumps({"task": "bulk-1", "job_id": "31", "state": "RUNNING"}))
    (tasks / "bulk-2.json").write_text(json.dumps({"task": "bulk-2", "job_id": "32", "state": "FINISHED",
                                                   "exit_code": 0}))
    res = cli("slurm", "status", str(run), "--json", cwd=tmp_path, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    jobs = {r["shard"]: r["job"] for r in st["shards"]}
    assert (jobs[1]["state"], jobs[1]["source"]) == ("TIMEOUT", "sacct -c")
    assert (jobs[2]["state"], jobs[2]["source"]) == ("COMPLETED", "task file")
    assert st["totals"]["pages"] == 3 and st["totals"]["missing"] == 3  # nothing read yet: all owed


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
                                "failed": 0, "missing": 0}
    assert [r["job"]["state"] for r in status["shards"]] == ["COMPLETED"] * 3
    table = cli("slurm", "status", str(run), cwd=tmp_path).stdout
    assert "final/pages" in table and "6/6" in table
    # Accounting is off here: plain sacct exits 1, the job completion log (sacct -c) answers.
    task_ids = [json.loads((run / "slurm" / "tasks" / f"bulk-{k}.json").read_text())["job_id"] for k in (1, 2, 3)]
    acct = sl.sacct_states(task_ids)
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


def test_job_serving_its_own_model_stops_the_server_on_sigterm_and_resumes(slurm, tmp_path):
    """Each task starts its server as on a GPU node (`vlmocr run --serve PROFILE`), here the
    stand-in tests/cluster/fake_vllm through VLMOCR_VLLM_BIN (the job inherits the environment).
    SIGTERM to the batch shell: vlmocr finishes pages in flight, stops the server, exits 130."""
    fake = Path(__file__).resolve().parent / "fake_vllm"
    if not fake.exists():
        pytest.skip("tests/cluster/fake_vllm (the vlmocr serve stand-in) is not there")
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

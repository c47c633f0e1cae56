"""``vlmocr slurm status``: what SLURM says of the jobs (squeue; sacct or ``sacct -c`` once the queue
forgot them; the tasks' own files) and, per shard, how many pages are final.

Nothing heavy on the login node (seed 000): a shard's counts come from the small summary.json its
run keeps current (``RunDir.summary``), so 64 shards of a million pages answer in about a second.
Only a shard whose run predates summary.json is counted from its records (the slow path, said so);
a shard that never started is not opened at all (its pages are not known yet)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...exceptions import SETTLED, UsageError
from ...inputs.sources import Document, shard_of
from ...runfolder.rundir import RunDir, run_keys
from .jobs import SLURM, TERMINAL_STATES, bulk_parts, latest_job, load_jobs
from .layout import GATE_FILE, GATE_RUN, SLURM_DIR, bulk_kind, read_json, shard_name, task_file
from .submit import staged_documents

GROUPS = ("ok", "fallback", "review", "failed", "missing")


def _shard_row(run_dir: Path, docs: list[Document]) -> dict[str, Any]:
    """Pages final / total of one run directory, by status group: from its summary.json; from
    its records when its run is older than summary.json; unknown when it never started."""
    run = RunDir(run_dir)
    summary = run.summary()
    if summary is not None:
        row = {"pages": int(summary.get("pages") or 0), "final": int(summary.get("final") or 0),
               **{k: int(summary.get(k) or 0) for k in GROUPS},
               "bad_inputs": int(summary.get("bad_inputs") or 0),
               "exit_code": summary.get("exit_code") if summary.get("state") == "finished" else None,
               "last_exit": summary.get("last_exit"), "updated": summary.get("updated_at"),
               "state": summary.get("state"), "source": "summary"}
        return row
    if not run.run_json.is_file():
        return {"pages": None, "final": 0, **dict.fromkeys(GROUPS, 0), "missing": None, "bad_inputs": 0,
                "exit_code": None, "last_exit": None, "updated": None, "state": "not started",
                "source": "not started"}
    return {**_tally_shard(run_dir, docs), "source": "records"}


def _tally_shard(run_dir: Path, docs: list[Document]) -> dict[str, Any]:
    """Completeness of one run directory for `docs`, from its records (runs without summary.json):
    pages final / total, by status group."""
    from ...exceptions import BadInput
    from ...inputs.render import count_pages
    from ...runfolder.record import Row, Status
    from ...runfolder.store import final_records

    run = RunDir(run_dir)
    info = run.run_info()
    keys = run_keys(info)
    finals = final_records(run.pages, keys=keys) if keys else {}
    by_doc: dict[str, dict[int, Row]] = {}
    doc_pages: dict[str, int] = {}
    for (doc_id, page), rec in finals.items():
        by_doc.setdefault(doc_id, {})[page] = rec
        if rec.doc_pages:
            doc_pages[doc_id] = rec.doc_pages
    row: dict[str, Any] = {"pages": 0, "final": 0, "ok": 0, "fallback": 0, "review": 0, "failed": 0, "missing": 0,
                           "bad_inputs": 0}
    for doc in docs:
        recs = by_doc.get(doc.doc_id, {})
        n = doc_pages.get(doc.doc_id)
        if n is None and 0 not in recs:
            try:
                n = count_pages(doc.path)
            except BadInput:
                n = None
            except Exception:
                n = None
        wanted = [0] if n is None else (list(doc.pages) if doc.pages else list(range(1, n + 1)))
        if n is not None and 0 in recs and not any(p in recs for p in wanted):
            wanted = [0]
        for p in wanted:
            row["pages"] += 1
            final = recs.get(p)
            if final is None:
                row["missing"] += 1
                continue
            row["final"] += 1
            row[final.status.group] += 1
            row["bad_inputs"] += final.status is Status.bad_input
    summary = info.summary or {}
    row["exit_code"] = summary.get("exit_code") if summary else None
    row["last_exit"] = row["exit_code"]
    row["updated"] = info.current.get("finished_at") or info.current.get("started_at")
    return row


def status(run_dir: Path) -> dict[str, Any]:  # noqa: PLR0915 (long: to be split)
    """Jobs (squeue; sacct or ``sacct -c`` for jobs SLURM's queue forgot) and, per shard, pages
    final / total with ok, fallback, review, failed and missing, read from the run directories.

    Every part of the bulk (``submit --part NAME``) is listed, its rows named ``NAME-K`` (and
    carrying ``part``); the bulk without --part keeps its rows as before (``shard`` K)."""
    run_dir = Path(run_dir).resolve()
    if not (run_dir / SLURM_DIR).is_dir() and not RunDir(run_dir).staged.is_dir():
        raise UsageError(f"{run_dir} is not a `vlmocr slurm` run directory (no slurm/ or staged/)")
    jobs = load_jobs(run_dir)
    out: dict[str, Any] = {"run_dir": str(run_dir), "jobs": [], "shards": [], "gate": None, "parts": []}
    for job in jobs["jobs"]:
        tasks = SLURM.tasks(job["job_id"]) if job.get("job_id") else []
        out["jobs"].append({**{k: job.get(k) for k in ("kind", "job_id", "array", "held", "submitted_at")},
                            **({"part": job["part"]} if job.get("part") else {}), "tasks": tasks})
    # The parts: the bulk without --part (also a run whose jobs.json is gone: its shard folders)
    # and every named part, in the order they were first submitted.
    parts = bulk_parts(run_dir)
    shard_counts: dict[str | None, int] = {}
    for part in parts:
        latest = latest_job(run_dir, "bulk", part)
        shard_counts[part] = int(latest["shards"]) if latest and latest.get("shards") else 0
    if None not in parts:
        shards = RunDir(run_dir).shards
        n = len([p for p in shards.glob("*") if p.name.isdigit()]) if shards.is_dir() else 0
        if n:
            parts.insert(0, None)
            shard_counts[None] = n
    # Per task: squeue for the latest submission, then the task's own file, then sacct / sacct -c.
    task_state: dict[str, dict[str, Any]] = {}
    for kind, part in [("gate", None)] + [("bulk", p) for p in parts]:
        latest = latest_job(run_dir, kind, part)
        if latest is None:
            continue
        prefix = bulk_kind(part)
        for t in SLURM.tasks(latest["job_id"]):
            name = "gate" if kind == "gate" else f"{prefix}-{t['task']}" if t["task"].isdigit() else None
            if name:
                task_state[name] = {"state": t["state"], "reason": t["reason"], "job_id": t["job_id"], "source": "squeue"}
            elif kind == "bulk" and t["task"]:  # pending tasks may still show as a range, e.g. 2-3
                for k in _expand(t["task"]):
                    task_state[f"{prefix}-{k}"] = {"state": t["state"], "reason": t["reason"], "job_id": t["job_id"],
                                                   "source": "squeue"}
    names = (["gate"] if latest_job(run_dir, "gate") else []) + [
        f"{bulk_kind(part)}-{k}" for part in parts for k in range(1, shard_counts[part] + 1)]
    lookup = []
    for name in names:
        tf = task_file(run_dir, name)
        if name in task_state:
            # squeue has the state; the task's own file the exit code of vlmocr, for this job.
            if (task_state[name]["state"] in TERMINAL_STATES and tf.get("state") == "FINISHED"
                    and str(tf.get("job_id")) == str(task_state[name].get("job_id"))):
                task_state[name]["exit_code"] = tf.get("exit_code")
            continue
        if tf.get("state") == "FINISHED":
            rc = tf.get("exit_code")
            # As SLURM saw it: the job script exits 0 for a settled outcome (9: unreadable inputs).
            task_state[name] = {"state": "COMPLETED" if rc in SETTLED else "FAILED", "exit_code": rc,
                                "job_id": tf.get("job_id"), "source": "task file"}
        elif tf.get("job_id"):
            lookup.append((name, str(tf["job_id"])))
    if lookup:
        acct = SLURM.finished([j for _, j in lookup])
        for name, jid in lookup:
            if jid in acct:
                task_state[name] = {**acct[jid], "job_id": jid}
            else:
                task_state[name] = {"state": "UNKNOWN", "job_id": jid, "source": "task file (started, no end)"}
    for part in parts:
        n = shard_counts[part]
        by_shard: dict[int, list[Document]] = {}
        for d in staged_documents(run_dir, bulk_kind(part)) if n else []:
            by_shard.setdefault(shard_of(d.doc_id, n), []).append(d)
        first = len(out["shards"])
        for k in range(1, n + 1):
            docs = by_shard.get(k, [])
            row = {"shard": k, **({"part": part, "name": shard_name(part, k)} if part else {}), "docs": len(docs),
                   **_shard_row(RunDir(run_dir).shard(shard_name(part, k)).path, docs),
                   "job": task_state.get(f"{bulk_kind(part)}-{k}", {})}
            out["shards"].append(row)
        latest = latest_job(run_dir, "bulk", part)
        rows = out["shards"][first:]
        out["parts"].append({"part": part, "shards": n, "job_id": latest.get("job_id") if latest else None,
                             "partition": (latest or {}).get("partition"),
                             **{k: sum(r[k] or 0 for r in rows) for k in ("docs", "pages", "final", "missing")}})
    gate = read_json(run_dir / SLURM_DIR / GATE_FILE)
    if isinstance(gate, dict):
        gdocs = staged_documents(run_dir, "gate")
        out["gate"] = {"max_cer": gate.get("max_cer"), "gate_job": gate.get("gate_job"),
                       "bulk_job": gate.get("bulk_job"), "release_job": gate.get("release_job"),
                       "job": task_state.get("gate", {}),
                       "run": _shard_row(run_dir / GATE_RUN, gdocs),
                       "decision": {k: (gate.get("decision") or {}).get(k) for k in ("action", "message", "at")}
                       if gate.get("decision") else None}
    totals = {k: sum(r[k] or 0 for r in out["shards"])
              for k in ("docs", "pages", "final", "ok", "fallback", "review", "failed", "missing", "bad_inputs")}
    out["totals"] = totals
    # Shards whose pages are not all known: never started (no file opened for them), or counted
    # from their records because their run is older than summary.json. K for the bulk without
    # --part, "NAME-K" for a part's.
    out["not_started"] = [r.get("name", r["shard"]) for r in out["shards"] if r["source"] == "not started"]
    out["from_records"] = [r.get("name", r["shard"]) for r in out["shards"] if r["source"] == "records"]
    return out


def _expand(spec: str) -> list[int]:
    spec = spec.split("%")[0].strip("[]")
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m:
            out.extend(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return out


def format_status(st: dict[str, Any]) -> str:
    lines = [f"run {st['run_dir']}"]
    for job in st["jobs"]:
        states: dict[str, int] = {}
        for t in job["tasks"]:
            states[t["state"]] = states.get(t["state"], 0) + 1
        live = ", ".join(f"{s} {c}" for s, c in sorted(states.items())) or "not in the queue"
        kind = job["kind"] + (f" {job['part']}" if job.get("part") else "")
        lines.append(f"  {kind:<5} job {job['job_id']:<8} array {job.get('array') or '-':<8} "
                     f"submitted {job.get('submitted_at') or '?'}  squeue: {live}")
    g = st.get("gate")
    if g:
        r = g["run"]
        gstate = g["job"].get("state", "?") + (f"({g['job']['exit_code']})" if g["job"].get("exit_code") else "")
        lines.append(f"gate: job {g['gate_job']} {gstate}, {r['final']}/{_n(r['pages'])} pages final, "
                     f"max CER {g['max_cer']}")
        if g.get("decision"):
            lines.append(f"  decision: {g['decision']['message']}")
        elif g.get("release_job"):
            lines.append(f"  not decided yet: release job {g['release_job']} decides when the gate has ended")
        else:
            lines.append("  not decided yet: `vlmocr slurm release RUN`")
    named = [pt for pt in st.get("parts") or [] if pt["part"]]
    for pt in named:
        lines.append(f"part {pt['part']}: job {pt['job_id'] or '-'}"
                     + (f" on {pt['partition']}" if pt.get("partition") else "")
                     + f", {pt['shards']} shard(s), {pt['docs']} docs, {pt['final']}/{pt['pages']} pages final")
    w = max([5] + [len(str(r.get("name", r["shard"]))) for r in st["shards"]])
    header = f"{'shard':>{w}} {'job':<24} {'docs':>5} {'final/pages':>12} {'ok':>6} {'fallbk':>6} {'review':>6} " \
             f"{'failed':>6} {'missing':>7} {'exit':>4}"
    lines.append(header)
    for r in st["shards"]:
        job = r["job"]
        state = job.get("state", "-")
        if job.get("exit_code") not in (None, "") and state not in ("COMPLETED",):
            state += f"({job['exit_code']})"
        if job.get("reason") and job.get("reason") not in ("None",) and state == "PENDING":
            state += f" {job['reason']}"
        lines.append(f"{r.get('name', r['shard']):>{w}} {state[:24]:<24} {r['docs']:>5} {str(r['final']) + '/' + _n(r['pages']):>12} "
                     f"{r['ok']:>6} {r['fallback']:>6} {r['review']:>6} {r['failed']:>6} {_n(r['missing']):>7} "
                     f"{'-' if r['exit_code'] is None else r['exit_code']:>4}")
    t = st["totals"]
    lines.append(f"{'all':>{w}} {'':<24} {t['docs']:>5} {str(t['final']) + '/' + str(t['pages']):>12} {t['ok']:>6} "
                 f"{t['fallback']:>6} {t['review']:>6} {t['failed']:>6} {t['missing']:>7}")
    if t.get("bad_inputs"):
        lines.append(f"{t['bad_inputs']} page(s) of unreadable inputs (bad_input)")
    if st.get("not_started"):
        lines.append(f"not started, pages not counted yet: shard(s) {_shard_list(st['not_started'])}")
    if st.get("from_records"):
        lines.append(f"counted from their records (slow: their runs predate summary.json): "
                     f"shard(s) {_shard_list(st['from_records'])}")
    return "\n".join(lines)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _shard_list(items: list[int | str]) -> str:
    """1,2,3 and part shards main-1, main-2 → "1-3, part main 1-2"."""
    groups: dict[str, list[int]] = {}
    for item in items:
        part, _, k = str(item).rpartition("-")
        groups.setdefault(part, []).append(int(k))
    return ", ".join((f"part {part} " if part else "") + _ranges(ks) for part, ks in groups.items())


def _ranges(ks: list[int]) -> str:
    """1,2,3,7 → 1-3,7"""
    spans: list[list[int]] = []
    for k in ks:
        if spans and spans[-1][1] == k - 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)

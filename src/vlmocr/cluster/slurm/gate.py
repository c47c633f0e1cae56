"""The quality gate: a sample read with the bulk's settings, scored against ground truth, releases
or cancels the bulk array that waits held behind it.

``vlmocr slurm gate`` submits the gate run (into RUN/gate), the bulk held, and the release step
as a small job that waits on the gate in SLURM's queue (`release_job`), not on the login node;
``vlmocr slurm release RUN`` (by hand, or in that job) scores the gate with `vlmocr.evaluation` — its truth loader, matching and scorer,
the same as ``vlmocr evaluate`` — and releases the bulk (``scontrol release``) or cancels it
(``scancel``), saying why. RUN/slurm/gate.json keeps the truth, the threshold, the jobs and the
decision.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from ...credentials import secrets_out_of_job
from ...evaluation import TruthPage, check_gate, load_truth, match_truth, parse_gate, score
from ...exceptions import ExitCode, UsageError, VlmocrError
from ...redact import public_argv
from ...runfolder.record import JsonObject, Row, now_iso
from ...runfolder.rundir import RunDir
from .jobs import SLURM, active_tasks, bulk_parts, check_not_active, latest_job, record_event, record_job
from .layout import GATE_FILE, GATE_RUN, SLURM_DIR, read_json, task_file, write_json
from .script import EXIT_MEANINGS, SlurmOptions
from .submit import prepare_job, submit


def gate_docs(run_dir: Path) -> list[dict[str, str]]:
    """The gate's documents: ``originals.csv`` rows (doc_id, original) of kind gate."""
    return [r for r in RunDir(run_dir).originals() if r.get("kind") == "gate"]


def gate_truth(truth: list[TruthPage], docs: list[dict[str, str]]) -> tuple[list[TruthPage], list[str]]:
    """The truth pages of the gate documents, under the gate's doc ids, and where the truth pages
    that match no gate document came from. A truth page belongs to the document whose original
    file is its image, else whose doc_id it names, else whose file stem it has (`match_truth`)."""
    doc_map = match_truth(truth, [d["doc_id"] for d in docs], {d["doc_id"]: d["original"] for d in docs})
    matched = [replace(t, doc_id=doc_map[t.doc_id]) for t in truth if t.doc_id in doc_map]
    return matched, [t.origin for t in truth if t.doc_id not in doc_map]


@dataclass
class GateScore:
    cer: float | None  # micro CER over every truth page, a missing page counting as CER 1; None: no truth
    pages: int  # truth pages
    missing: int  # … without a record in the gate run
    failed: int  # … whose record failed (error, refused, bad_input: scored on its text, usually empty)
    errors: int
    chars: int
    cer_scored: float | None = None  # micro CER over the pages that have a record
    cer_ci: tuple[float, float] | None = None  # bootstrap 95 % interval of cer_scored
    mean_page_cer: float | None = None
    statuses: dict[str, int] = field(default_factory=dict)
    worst: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)  # extra `vlmocr evaluate` gates

    def as_dict(self) -> JsonObject:
        return asdict(self)


def score_gate(run_dir: Path, truth: list[TruthPage], checks: Sequence[str] = ()) -> GateScore:
    """Score a gate run against its truth pages (under the gate's doc ids, `gate_truth`) with
    ``vlmocr evaluate``'s scorer (NFC, whitespace collapsed, Levenshtein / reference length).

    The gate's number is the corpus CER *with missing pages*: a truth page without a final record
    counts as entirely wrong, a failed page is scored on its (usually empty) text. ``checks`` are
    further gates in `vlmocr evaluate --gate` syntax (e.g. ``cer_hi<=0.05``)."""
    from ...runfolder.record import FAILED, Status

    finals = RunDir(run_dir).reading()
    evaluation = score(finals, truth)
    corpus = evaluation.corpus
    statuses: dict[str, int] = {}
    failed = 0
    for p in evaluation.pages:
        statuses[p.status] = statuses.get(p.status, 0) + 1
        try:
            failed += Status(p.status) in FAILED
        except ValueError:
            pass
    missing = corpus.missing
    errors = corpus.char_edits + sum(p.ref_chars for p in evaluation.pages if p.missing)
    chars = corpus.ref_chars + sum(p.ref_chars for p in evaluation.pages if p.missing)
    cer = corpus.cer_with_missing if corpus.cer_with_missing is not None else 1.0
    results = []
    for spec in checks:
        r = check_gate(evaluation, parse_gate(spec), allow_missing=True)
        results.append({"gate": spec, "passed": r.passed, "measured": r.measured, "message": r.message})
    worst = [{"doc_id": p.doc_id, "page": p.page, "status": p.status, "cer": round(p.cer, 4)}
             for p in sorted(evaluation.pages, key=lambda p: (-p.cer, p.doc_id, p.page))[:5]]
    return GateScore(round(cer, 5), corpus.pages, missing, failed, errors, chars,
                     None if corpus.cer is None else round(corpus.cer, 5),
                     tuple(round(x, 5) for x in corpus.cer_ci) if corpus.cer_ci else None,  # type: ignore[arg-type]
                     None if corpus.cer_macro is None else round(corpus.cer_macro, 5), statuses, worst, results)


def check_gate_request(truth: str | Path | None, max_cer: float | None, checks: Sequence[str]) -> None:
    """A gate is scored against truth (--truth and --max-cer), or, for a pilot nobody has typed
    truth for, only by gates that need none (--require 'unknown_words<=X', evaluation/spelling.py)."""
    from ...evaluation.spelling import NO_TRUTH_METRICS

    gates = [parse_gate(spec) for spec in checks]  # a typo fails now, not when the gate is scored
    if truth is not None and max_cer is None:
        raise UsageError("--truth needs --max-cer (the CER the gate must reach)")
    if truth is None:
        if max_cer is not None:
            raise UsageError("--max-cer needs --truth to score the gate against")
        if not gates:
            raise UsageError("give --truth T --max-cer X, or, without truth, a --require gate that needs none "
                             f"({', '.join(NO_TRUTH_METRICS)}), e.g. --require 'unknown_words<=0.08'")
        if needs := [g.spec for g in gates if g.metric not in NO_TRUTH_METRICS]:
            raise UsageError(f"--require {needs[0]!r} needs --truth; without truth only {', '.join(NO_TRUTH_METRICS)} "
                             "can gate")
    if max_cer is not None and max_cer < 0:
        raise UsageError("--max-cer must be ≥ 0")


def score_gate_without_truth(run_dir: Path, checks: Sequence[str]) -> GateScore:
    """A gate run scored by the gates that need no truth (the spelling count) over its records."""
    from ...evaluation.score import check_spelling_gate
    from ...evaluation.spelling import measure_spelling
    from ...runfolder.record import FAILED

    run = RunDir(run_dir)
    finals: Mapping[tuple[str, int], Row] = run.reading() if run.pages.is_file() else {}
    statuses: dict[str, int] = {}
    failed = 0
    for rec in finals.values():
        statuses[rec.status.value] = statuses.get(rec.status.value, 0) + 1
        failed += rec.status in FAILED
    spelling = measure_spelling(finals)
    results = []
    for spec in checks:
        r = check_spelling_gate(spelling, parse_gate(spec))
        results.append({"gate": spec, "passed": r.passed, "measured": r.measured, "message": r.message})
    return GateScore(None, len([k for k in finals if k[1] > 0]), 0, failed, 0, 0, statuses=statuses, checks=results)


def submit_gate(run_dir: Path, *, gate_paths: Sequence[str] = (), gate_manifest: str | Path | None = None,
                truth: str | Path | None, max_cer: float | None, bulk_paths: Sequence[str] = (),
                bulk_manifest: str | Path | None = None, shards: int, run_args: Sequence[str] = (),
                options: SlurmOptions | None = None, after_gate: bool = False, dry_run: bool = False,
                python: str | None = None, argv: Sequence[str] | None = None, checks: Sequence[str] = (),
                warn=print, release_job: bool = True) -> dict[str, Any]:
    """Submit the gate job (a normal run into RUN/gate), the bulk array held and, with
    ``release_job``, the release step as a job after the gate (``afterany``).

    That job — or ``vlmocr slurm release RUN`` by hand — scores the gate and releases or cancels
    the bulk. With
    ``after_gate`` the bulk also depends on the gate (``afterany``), so even a manual
    ``scontrol release`` cannot start it before the gate ended."""
    check_gate_request(truth, max_cer, checks)
    options = options or SlurmOptions()
    options.directives()  # every #SBATCH value checked before anything is staged
    run_dir = Path(run_dir).resolve()
    run_args, exports = secrets_out_of_job(run_dir / SLURM_DIR, run_args)  # no password in a script
    truth_pages = load_truth(truth) if truth is not None else None
    if not dry_run:
        check_not_active(run_dir, "gate")
        check_not_active(run_dir, "bulk")
    gate_script, _ = prepare_job(run_dir, "gate", paths=gate_paths, manifest=gate_manifest, shards=None,
                                 run_args=run_args, options=options, python=python, warn=warn, exports=exports)
    matched: list[TruthPage] = []
    if truth_pages is not None:
        matched, unmatched = gate_truth(truth_pages, gate_docs(run_dir))
        if not matched:
            raise UsageError(f"no truth page in {truth} matches a gate document (by image path, doc_id or file stem)")
        if unmatched:
            warn(f"note: {len(unmatched)} truth file(s) match no gate document, e.g. {unmatched[0]}")
        no_truth = sorted({d["doc_id"] for d in gate_docs(run_dir)} - {t.doc_id for t in matched})
        if no_truth:
            warn(f"note: {len(no_truth)} gate document(s) have no truth and are not scored, e.g. {no_truth[0]!r}")
    result: dict[str, Any] = {"gate_script": str(gate_script), "truth_pages": len(matched)}
    gate_id = None
    if not dry_run:
        gate_id = SLURM.submit(gate_script)
        record_job(run_dir, {"kind": "gate", "job_id": gate_id, "array": None, "shards": None, "held": False,
                             "dependency": None, "script": str(gate_script.relative_to(run_dir)),
                             "submitted_at": now_iso("seconds"), "sbatch": SLURM.submission(gate_script),
                             "run_args": list(run_args), "argv": public_argv(list(argv or sys.argv[1:])),
                             "cwd": str(Path.cwd())})
    dependency = f"afterany:{gate_id}" if (after_gate and gate_id) else None
    bulk = submit(run_dir, paths=bulk_paths, manifest=bulk_manifest, shards=shards, run_args=run_args,
                  options=options, hold=True, dependency=dependency, dry_run=dry_run, python=python,
                  argv=argv, warn=warn, all_shards=True, exports=exports)
    result.update(gate_job=gate_id, bulk_job=bulk.job_id, bulk_script=str(bulk.script), bulk_array=bulk.array)
    if not dry_run:
        write_json(run_dir / SLURM_DIR / GATE_FILE, {
            "truth": os.path.abspath(truth) if truth is not None else None, "max_cer": max_cer, "checks": list(checks),
            "gate_job": gate_id, "bulk_job": bulk.job_id,
            "truth_pages": len(matched), "submitted_at": now_iso("seconds"), "decision": None,
        })
    result["release_job"] = None
    if not dry_run and release_job and gate_id and bulk.job_id:
        result["release_job"] = _submit_release_job(run_dir, gate_id, options, python)
    return result


def _submit_release_job(run_dir: Path, gate_id: str, options: SlurmOptions, python: str | None) -> str:
    """The release step, submitted held and let go only once jobs.json and gate.json name it: a
    gate that ends at once cannot start it before they are written."""
    from .release_job import write_release_script

    script = write_release_script(run_dir, gate_id, options, python)
    job_id = SLURM.submit(script, hold=True)
    record_job(run_dir, {"kind": "release", "job_id": job_id, "array": None, "shards": None, "held": False,
                         "dependency": f"afterany:{gate_id}", "script": str(script.relative_to(run_dir)),
                         "submitted_at": now_iso("seconds")})
    gate = read_json(run_dir / SLURM_DIR / GATE_FILE)
    gate["release_job"] = job_id
    write_json(run_dir / SLURM_DIR / GATE_FILE, gate)
    ok, output = SLURM.release([job_id])
    if not ok:
        raise VlmocrError(f"cannot let the release job {job_id} go (scontrol release: {output}); "
                          f"release it by hand, or decide with `vlmocr slurm release {run_dir}`")
    return job_id


@dataclass
class GateDecision:
    passed: bool
    score: GateScore
    max_cer: float | None  # None: a gate without truth (its --require gates decide alone)
    action: str  # released | cancelled | none
    bulk_job: str | None
    message: str
    slurm_output: str = ""
    # Parts submitted held into the same RUN (`slurm submit --part NAME --hold`), decided with the
    # gate's own bulk: [{"part": NAME, "job_id": ID}].
    held_parts: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["score"] = self.score.as_dict()
        return d


def held_part_jobs(run_dir: Path, but: str | None = None) -> list[dict[str, Any]]:
    """The latest bulk job of every part of the run that was submitted held (``--hold``) and
    is still held in the queue, except the job `but` (the gate's own): the gate releases or
    cancels them with its own bulk. A part someone already let go, or that ended, is left alone."""
    out = []
    for part in bulk_parts(run_dir):
        job = latest_job(run_dir, "bulk", part)
        if not job or not job.get("held") or str(job["job_id"]) == str(but):
            continue
        if any(t["state"] == "PENDING" and "Held" in t["reason"] for t in active_tasks(job["job_id"])):
            out.append({"part": part, "job_id": job["job_id"]})
    return out


def _jobs_phrase(bulk: str | None, parts: list[dict[str, Any]]) -> str:
    """"bulk job 12", "bulk job 12 and held part(s) main (job 13), elem (job 14)"."""
    named = ", ".join(f"{p['part'] or 'without --part'} (job {p['job_id']})" for p in parts)
    if not parts:
        return f"bulk job {bulk}"
    return (f"bulk job {bulk} and held part(s) {named}" if bulk else f"held part(s) {named}")


# Seed 000: "run squeue -u $USER and sacct -j <id> in one SSH call, at most once a minute. Never
# loop watch against a login node." While --wait runs, the scheduler is asked once a minute; the
# gate task's own file (RUN/slurm/tasks/gate.json, written by its job script) is read meanwhile.
SQUEUE_EVERY = 60.0
TASK_FILE_EVERY = 2.0


def gate_task_finished(run_dir: Path, gate_job: str) -> bool:
    """The gate job's script says its task has finished (its vlmocr exited: the records are final)."""
    told = task_file(run_dir, "gate")
    return str(told.get("job_id") or "") == str(gate_job) and told.get("state") == "FINISHED"


def release(run_dir: Path, *, max_cer: float | None = None, wait: float = 0.0, dry_run: bool = False,  # noqa: PLR0915 (long: to be split)
            poll: float = TASK_FILE_EVERY, ask_jobs_every: float = SQUEUE_EVERY) -> GateDecision:
    """Score the gate run and release the held bulk jobs (``scontrol release``) when its CER is at
    most the threshold, else cancel them (``scancel``). Saying why, either way. The held bulk jobs
    are the gate's own and every part of the run still held (`held_part_jobs`)."""
    run_dir = Path(run_dir).resolve()
    gate = read_json(run_dir / SLURM_DIR / GATE_FILE)
    if not isinstance(gate, dict):
        raise UsageError(f"{run_dir} has no gate (RUN/slurm/gate.json): submit one with `vlmocr slurm gate`")
    has_truth = bool(gate.get("truth"))
    if max_cer is not None and not has_truth:
        raise UsageError("--max-cer: this gate has no truth (it was submitted with --require gates only)")
    threshold = float(gate["max_cer"] if max_cer is None else max_cer) if has_truth else None
    gate_job = gate.get("gate_job")
    deadline = time.monotonic() + wait
    asked_at = -ask_jobs_every
    live: list[dict[str, str]] = []
    while gate_job and not gate_task_finished(run_dir, gate_job):
        now = time.monotonic()
        if now - asked_at >= ask_jobs_every:
            live, asked_at = active_tasks(gate_job), now
            if not live:
                break
        if now >= deadline:
            raise VlmocrError(
                f"the gate job {gate_job} is still {live[0]['state'] if live else 'running'}: release scores it "
                "once it has ended (or pass --wait SECONDS)", ExitCode.incomplete)
        time.sleep(min(poll, max(0.0, deadline - now)))
    if threshold is not None:
        matched, _ = gate_truth(load_truth(gate["truth"]), gate_docs(run_dir))
        if not matched:
            raise UsageError(f"no truth page in {gate['truth']} matches a gate document")
        score = score_gate(run_dir / GATE_RUN, matched, gate.get("checks") or [])
        cer_ok = score.cer is not None and score.cer <= threshold
        detail = (f"CER {score.cer:.4f} {'≤' if cer_ok else '>'} {threshold:g} over {score.pages} page(s), "
                  f"{score.missing} missing and {score.failed} failed (counted as CER 1)")
    else:
        score = score_gate_without_truth(run_dir / GATE_RUN, gate.get("checks") or [])
        cer_ok = score.pages > 0  # a gate that read nothing passes nothing
        detail = (f"no truth: {score.pages} page(s) read, {score.failed} failed" if cer_ok
                  else "no truth, and the gate run has no page read")
    passed = cer_ok and all(c["passed"] for c in score.checks)
    bulk = gate.get("bulk_job")
    failing = [c["message"] for c in score.checks if not c["passed"]]
    if failing:
        detail += "; " + "; ".join(failing)
    task = task_file(run_dir, "gate")
    code = task.get("exit_code") if task.get("state") == "FINISHED" else None
    rc = code if isinstance(code, int) else None
    if rc not in (None, 0):
        detail += f"; the gate run exited {rc} ({EXIT_MEANINGS.get(rc, 'see vlmocr exit codes')}, see its log)"
    output = ""
    parts = held_part_jobs(run_dir, but=bulk)
    ids = ([bulk] if bulk else []) + [p["job_id"] for p in parts]
    if dry_run or not ids:
        action = "none"
        message = f"gate {'passed' if passed else 'FAILED'}: {detail}; " + (
            "dry run, bulk jobs untouched" if dry_run else "no bulk job recorded")
    elif passed:
        ok, output = SLURM.release(ids)
        action = "released"
        message = (f"gate passed: {detail}; released {_jobs_phrase(bulk, parts)}"
                   + ("" if ok else f" (scontrol: {output})"))
    else:
        ok, output = SLURM.cancel(ids)
        action = "cancelled"
        message = (f"gate FAILED: {detail}; cancelled {_jobs_phrase(bulk, parts)}"
                   + ("" if ok else f" (scancel: {output})"))
    decision = GateDecision(passed, score, threshold, action, bulk, message, output, parts)
    if not dry_run:
        gate["decision"] = {"at": now_iso("seconds"), **decision.as_dict()}
        write_json(run_dir / SLURM_DIR / GATE_FILE, gate)
        record_event(run_dir, {"action": action, "job_id": bulk, "cer": score.cer, "max_cer": threshold,
                               "pages": score.pages, "missing": score.missing,
                               **({"parts": parts} if parts else {})})
    return decision

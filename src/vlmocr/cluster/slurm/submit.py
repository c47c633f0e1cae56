"""Submitting: the inputs staged under ASCII names, the shards that are already complete, the
array (or grid) script written and handed to sbatch."""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ...credentials import secrets_out_of_job
from ...engines.registry import HTTP_ENGINE
from ...exceptions import SETTLED, ExitCode, UsageError
from ...files import atomic_file, write_text_atomic
from ...inputs.skipped import SkippedFiles
from ...inputs.sources import SUPPORTED_EXTS, Document, discover, from_manifest, shard_of
from ...redact import public_argv
from ...runfolder.record import JsonObject, now_iso
from ...runfolder.rundir import RunDir
from .jobs import SLURM, check_not_active, record_job
from .layout import BULK, SLURM_DIR, bulk_kind, check_part_name, part_of_kind, shard_name
from .script import SlurmOptions, job_name_for, render_script

# ============================================================================ staging


@dataclass
class StagedDoc:
    kind: str
    doc_id: str
    staged: str  # file name under RUN/staged
    original: str  # absolute path of the original file
    pages: str = ""
    dpi: str = ""
    language: str = ""
    language_from: str = ""  # "triage": the language is a suggestion (wrong_language does not judge by it)
    hard: str = ""  # why a person marked it hard (a VLM tier reads it)


def _pages_spec(pages: tuple[int, ...] | None) -> str:
    if not pages:
        return ""
    out, start, prev = [], pages[0], pages[0]
    for p in list(pages[1:]) + [None]:  # type: ignore[list-item]
        if p is not None and p == prev + 1:
            prev = p
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        if p is not None:
            start = prev = p
    return ",".join(out)


def _staged_suffix(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in SUPPORTED_EXTS:
        return ext
    if re.fullmatch(r"\.[a-z0-9]{1,8}", ext):
        return ext  # unsupported but harmless: the run reports it as bad_input, as it would anyway
    return ".bin"


def stage_documents(run_dir: Path, kind: str, paths: Sequence[str] = (), manifest: str | Path | None = None,
                    warn=print, check: Callable[[list[Document]], None] | None = None
                    ) -> tuple[Path, list[StagedDoc]]:
    """Symlink every input under an ASCII name and write RUN/staged/<kind>.csv.

    Document ids are derived from the original names exactly as ``vlmocr run`` derives them
    (``discover``), before staging, so a shard's records carry the ids the user expects.
    Restaging the same inputs reuses the same names (resubmitting resumes). ``check`` sees the
    documents before anything is written (a part refuses documents another part holds)."""
    run = RunDir(run_dir)
    staged_dir = run.staged
    staged_dir.mkdir(parents=True, exist_ok=True)
    skipped = SkippedFiles()
    docs = discover(list(paths), manifest, skipped=skipped)  # validates ids (unsafe, duplicate) before anything is submitted
    if skipped.phrase():  # the shards read a staged manifest: this is the only walk that sees them
        warn(f"{kind}: {skipped.phrase()} (not documents: not staged)")
    if check is not None:
        check(docs)
    previous = run.originals()
    by_original = {r["original"]: r["staged"] for r in previous}
    used = {r["staged"] for r in previous}
    numbers = [int(m.group(1)) for s in used if (m := re.match(r"(\d+)", s))]
    next_number = max(numbers, default=0) + 1
    staged: list[StagedDoc] = []
    for doc in docs:
        original = os.path.abspath(doc.path)
        name = by_original.get(original)
        if name is None:
            while True:
                name = f"{next_number:04d}{_staged_suffix(doc.path)}"
                next_number += 1
                if name not in used:
                    break
            used.add(name)
            by_original[original] = name
        link = staged_dir / name
        try:
            current = os.readlink(link)
        except OSError:
            current = None
        if current != original:
            with atomic_file(link) as tmp:
                os.symlink(original, tmp)
        staged.append(StagedDoc(kind, doc.doc_id, name, original, _pages_spec(doc.pages),
                                "" if doc.dpi is None else repr(doc.dpi), doc.language or "", doc.language_from,
                                doc.hard))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    # The language columns only when a document has one: the staged manifests of runs without
    # stay as they were (an unchanged file keeps its mtime, and resubmitting changes nothing).
    # Where it came from goes with it: a triage suggestion staged is still no one's word.
    languages = any(s.language for s in staged)
    suggested = any(s.language_from for s in staged)
    hard = any(s.hard for s in staged)
    writer.writerow(["doc_id", "path", "pages", "dpi"] + (["language"] if languages else [])
                    + (["language_from"] if suggested else []) + (["hard"] if hard else []))
    for s in staged:
        writer.writerow([s.doc_id, s.staged, s.pages, s.dpi] + ([s.language] if languages else [])
                        + ([s.language_from] if suggested else []) + ([s.hard] if hard else []))
    manifest_path = staged_dir / f"{kind}.csv"
    _write_if_changed(manifest_path, buf.getvalue())
    # The originals, for people and for merge (records name the staged file as their source).
    rows = [r for r in previous if r.get("kind") != kind] + [asdict(s) for s in staged]
    buf = io.StringIO()
    originals = csv.DictWriter(buf, fieldnames=["kind", "doc_id", "staged", "original", "pages", "dpi"],
                               lineterminator="\n", extrasaction="ignore")
    originals.writeheader()
    originals.writerows(rows)
    _write_if_changed(run.originals_csv, buf.getvalue())
    # The staged manifest must give the same ids (a manifest strips spaces around a doc_id).
    reread = [d.doc_id for d in from_manifest(manifest_path)]
    for s, got in zip(staged, reread):
        if got != s.doc_id:
            warn(f"warning: doc_id {s.doc_id!r} reads back as {got!r} from the staged manifest")
            s.doc_id = got
    return manifest_path, staged


def staged_documents(run_dir: Path, kind: str) -> list[Document]:
    path = RunDir(run_dir).staged / f"{kind}.csv"
    return from_manifest(path) if path.exists() else []


def _write_if_changed(path: Path, text: str) -> bool:
    """Write atomically unless the file already holds `text` (keeps its mtime stable)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    write_text_atomic(path, text)
    return True


# ============================================================================ submit


@dataclass
class Submission:
    kind: str
    script: Path
    job_id: str | None = None
    array: str | None = None  # the shards as the job runs them (jobs.json)
    skipped_shards: list[int] = field(default_factory=list)
    note: str = ""
    only: str | None = None  # the shards submitted when not all are owed (else the script's own array)
    hold: bool = False
    dependency: str | None = None

    @property
    def command(self) -> list[str]:
        """The submission, as a person would type it in the script's folder."""
        return SLURM.submission(self.script, array=self.only, hold=self.hold, dependency=self.dependency)


def compress_ranges(numbers: Iterable[int]) -> str:
    """Shard numbers as SLURM writes an array: ``1-3,5``."""
    return _pages_spec(tuple(sorted(set(numbers))))


def vlmocr_commit() -> str | None:
    from ...runfolder.rundir import git_commit

    return git_commit()


def shard_argv(run_dir: Path, k: int, n: int, run_args: Sequence[str], part: str | None = None) -> list[str]:
    """The argv (after ``vlmocr``) a bulk task (of `part`) runs, as run.json records it."""
    run = RunDir(run_dir)
    return ["run", "--manifest", str(run.staged / f"{bulk_kind(part)}.csv"), "--out", str(run.shard(shard_name(part, k)).path),
            "--shard", f"{k}/{n}", *run_args]


# Options that change neither the text nor which pages are owed: a shard finished under other
# values of these is still complete.
_NEUTRAL_OPTIONS = {"--stop-grace": 1, "--workers": 1, "--concurrency": 1, "--request-timeout": 1, "--json": 0,
                    "--adaptive": 0, "--fixed-concurrency": 0}


def _comparable(argv: Sequence[str]) -> list[str]:
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
            continue
        name = a.split("=", 1)[0]
        if name in _NEUTRAL_OPTIONS:
            skip = _NEUTRAL_OPTIONS[name] if "=" not in a else 0
            continue
        out.append(a)
    return out


def _settled(exit_code: object, key_material: JsonObject) -> bool:
    """Does a shard whose last run ended with `exit_code` owe nothing? 0 and 9 always; 2 (pages for
    review) when a CPU engine read them, with or without a VLM tier: only a VLM's review page owes
    a retry ladder a resubmit would climb, a CPU reading is read no better again."""
    if exit_code in SETTLED:
        return True
    return exit_code == ExitCode.review and key_material.get("reader") not in (None, HTTP_ENGINE)


def complete_shards(run_dir: Path, n: int, run_args: Sequence[str], part: str | None = None) -> list[int]:
    """Shards that owe nothing: their last run finished with exit 0, or 9 (every page final, some
    inputs unreadable: a resubmit reads them no better), or 2 from a CPU reading (`_settled`),
    under this command (up to options that
    change neither text nor work, e.g. --stop-grace, --workers), after the staged manifest last
    changed: resubmitting need not start them again (no server start, no GPU). Of `part` NAME:
    its own shards (RUN/shards/NAME-K) against its own manifest."""
    run = RunDir(run_dir)
    manifest = run.staged / f"{bulk_kind(part)}.csv"
    try:
        manifest_mtime = manifest.stat().st_mtime
    except OSError:
        return []
    done = []
    for k in range(1, n + 1):
        shard = run.shard(shard_name(part, k))
        path = shard.run_json
        info = shard.run_info()
        summary = info.summary or {}
        argv = info.current.get("argv")
        try:
            fresh = path.stat().st_mtime > manifest_mtime
        except OSError:
            continue
        if (fresh and _settled(summary.get("exit_code"), info.key_material) and isinstance(argv, list)
                and _comparable(argv) == _comparable(shard_argv(run_dir, k, n, run_args, part))):
            done.append(k)
    return done


def prepare_job(run_dir: Path, kind: str, *, paths: Sequence[str] = (), manifest: str | Path | None = None,
                shards: int | None, run_args: Sequence[str], options: SlurmOptions, python: str | None = None,
                warn=print, part: str | None = None,
                check: Callable[[list[Document]], None] | None = None,
                exports: dict[str, str] | None = None) -> tuple[Path, list[StagedDoc]]:
    """Stage the inputs and write RUN/slurm/<kind>.sbatch (bulk-NAME.sbatch for part NAME);
    return the script and the staged docs."""
    run_dir = Path(run_dir).resolve()
    files = bulk_kind(part) if kind == BULK else kind
    _, staged = stage_documents(run_dir, files, paths, manifest, warn=warn, check=check)
    slurm_dir = run_dir / SLURM_DIR
    (slurm_dir / "logs").mkdir(parents=True, exist_ok=True)
    text = render_script(
        kind=kind, run_dir=run_dir, python=python or sys.executable, shards=shards, run_args=run_args,
        options=options, submit_dir=Path.cwd(), commit=vlmocr_commit(), job_name=job_name_for(run_dir, files),
        part=part, exports=exports)
    script = slurm_dir / f"{files}.sbatch"
    script.write_text(text, encoding="utf-8")
    script.chmod(0o755)
    return script, staged


def submit(run_dir: Path, *, paths: Sequence[str] = (), manifest: str | Path | None = None, shards: int,
           run_args: Sequence[str] = (), options: SlurmOptions | None = None, hold: bool = False,
           dependency: str | None = None, dry_run: bool = False, all_shards: bool = False,
           python: str | None = None, kind: str = "bulk", argv: Sequence[str] | None = None,
           warn=print, part: str | None = None, exports: dict[str, str] | None = None) -> Submission:
    """Stage, write the array script and submit it (``sbatch --parsable``); record it in jobs.json.

    Resubmitting the same command resumes: same staged names, same shard directories. Shards
    that already finished under exactly this command are left out of the array unless
    ``all_shards``; with nothing left, nothing is submitted.

    With ``part`` NAME the job is one part of the run's bulk, beside the others (its own staged
    manifest, shards RUN/shards/NAME-K, script and options; live at the same time as the rest):
    resubmitting it resumes that part alone. A document is in one part only (`check_one_part`)."""
    if shards < 1:
        raise UsageError("--shards must be at least 1")
    if part is not None:
        check_part_name(part)
    options = options or SlurmOptions()
    options.directives()  # every #SBATCH value checked before anything is staged
    run_dir = Path(run_dir).resolve()
    # A password in an endpoint URL goes to RUN/slurm/credentials (600), not into the script.
    run_args, found = secrets_out_of_job(run_dir / SLURM_DIR, run_args)
    exports = {**(exports or {}), **found}
    if not dry_run:
        check_not_active(run_dir, kind, part)
    script, staged = prepare_job(run_dir, kind, paths=paths, manifest=manifest, shards=shards, run_args=run_args,
                                 options=options, python=python, warn=warn, part=part,
                                 check=lambda docs: check_one_part(run_dir, part, docs), exports=exports)
    empty = [k for k in range(1, shards + 1) if not any(shard_of(s.doc_id, shards) == k for s in staged)]
    if empty:
        warn(f"note: shard(s) {compress_ranges(empty)} of {shards} hold no document (they finish at once)")
    sub = Submission(kind, script, hold=hold, dependency=dependency)
    todo = list(range(1, shards + 1))
    if not all_shards:
        done = complete_shards(run_dir, shards, run_args, part)
        sub.skipped_shards = done
        todo = [k for k in todo if k not in done]
    if not todo:
        sub.note = (f"all {shards} shards owe nothing under this command (last outcome 0; 9: unreadable "
                    "inputs listed in bad_inputs.csv; or 2 from a CPU reading: its review pages are read no "
                    "better again): nothing submitted (--all-shards to rerun)")
        return sub
    if len(todo) < shards:
        sub.array = sub.only = compress_ranges(todo) + (f"%{options.max_running}" if options.max_running else "")
    else:
        sub.array = f"1-{shards}" + (f"%{options.max_running}" if options.max_running else "")
    if dry_run:
        sub.note = "dry run: nothing submitted"
        return sub
    sub.job_id = SLURM.submit(script, array=sub.only, hold=hold, dependency=dependency)
    record_job(run_dir, {
        "kind": kind, **({"part": part} if part else {}), "job_id": sub.job_id, "partition": options.partition,
        "array": sub.array, "shards": shards, "held": hold,
        "dependency": dependency, "script": str(script.relative_to(run_dir)), "submitted_at": now_iso("seconds"),
        "sbatch": sub.command, "run_args": list(run_args),
        "documents": len(staged), "skipped_shards": sub.skipped_shards, "argv": public_argv(list(argv or sys.argv[1:])),
        "cwd": str(Path.cwd()),
    })
    return sub


def part_owners(run_dir: Path, but: str | None = None) -> dict[str, str | None]:
    """doc_id → the part whose staged manifest holds it (None: the bulk without --part), over
    every part of the run except `but` (a staged bulk manifest is that part's claim)."""
    owners: dict[str, str | None] = {}
    staged = RunDir(run_dir).staged
    for path in sorted(staged.glob(f"{BULK}*.csv")) if staged.is_dir() else []:
        kind = path.stem
        if not (kind == BULK or kind.startswith(BULK + "-")) or kind == bulk_kind(but):
            continue
        with path.open(encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):  # written by stage_documents: the ids as run reads them
                owners.setdefault((row.get("doc_id") or "").strip(), part_of_kind(kind))
    return owners


def check_one_part(run_dir: Path, part: str | None, docs: Sequence[Document]) -> None:
    """Refuse a document another part of the run already holds: two parts would read its pages
    twice, and merge would have to choose. Moving work elsewhere is resubmitting its own part
    (``--part NAME --partition …``): that part resumes where it stopped."""
    owners = part_owners(run_dir, but=part)
    for doc in docs:
        if doc.doc_id in owners:
            other = owners[doc.doc_id]
            where = f"part {other}" if other else "the bulk without --part"
            again = f"--part {other}" if other else "no --part"
            raise UsageError(f"document {doc.doc_id!r} is already in {where} of {run_dir}: a document is in one "
                             f"part only (to move it, resubmit with {again} and another --partition)")


# ============================================================================ grid


def submit_grid(run_dir: Path, grid_args: Sequence[str], *, options: SlurmOptions | None = None,
                dry_run: bool = False, python: str | None = None) -> JsonObject:
    """One job that reads a prompt × dpi (× profile) grid against ONE server it starts
    (`vlmocr grid --serve P …`), so the model loads once for every cell. Results land in
    RUN/grid (grid.json, one run directory per cell)."""
    options = options or SlurmOptions()
    run_dir = Path(run_dir).resolve()
    if "--out" in grid_args or "-o" in grid_args:
        raise UsageError("the grid writes to RUN/grid: give --out to `vlmocr slurm grid`, not to the grid")
    if "--truth" not in grid_args:
        raise UsageError("a grid needs --truth (pass the `vlmocr grid` options after --)")
    command = ["grid", *[os.path.abspath(a) if os.path.exists(a) else a for a in grid_args]]
    return submit_single(run_dir, "grid", command, options=options, dry_run=dry_run, python=python,
                         run_args=grid_args)


def submit_single(home: Path, kind: str, command: Sequence[str], *, options: SlurmOptions, dry_run: bool = False,
                  python: str | None = None, run_args: Sequence[str] = (), pass_out: bool = True) -> JsonObject:
    """One job (no array) running ``vlmocr COMMAND`` in the harness of the others (offline
    environment, per-job caches, SIGTERM forwarded, task file): HOME/slurm/<kind>.sbatch, its log
    HOME/slurm/logs/<kind>_<job>.out, the submission recorded in HOME/slurm/jobs.json. With
    ``pass_out`` the command writes to ``--out HOME/<kind>`` (the grid); without, where its own
    arguments say (describe)."""
    home = Path(home).resolve()
    (home / SLURM_DIR / "logs").mkdir(parents=True, exist_ok=True)
    script = home / SLURM_DIR / f"{kind}.sbatch"
    command, exports = secrets_out_of_job(home / SLURM_DIR, command)
    run_args = public_argv(list(run_args))
    text = render_script(kind=kind, run_dir=home, python=python or sys.executable, shards=None, run_args=(),
                         options=options, submit_dir=Path.cwd(), commit=vlmocr_commit(),
                         job_name=job_name_for(home, kind), command=command, pass_out=pass_out, exports=exports)
    script.write_text(text, encoding="utf-8")
    script.chmod(0o755)
    result: JsonObject = {"script": str(script), "job_id": None,
                              "sbatch": SLURM.submission(script)}
    if not dry_run:
        result["job_id"] = SLURM.submit(script)
        record_job(home, {"kind": kind, "job_id": result["job_id"], "array": None, "shards": None,
                          "held": False, "dependency": None, "script": str(script.relative_to(home)),
                          "submitted_at": now_iso("seconds"), "sbatch": result["sbatch"],
                          "run_args": list(run_args), "argv": public_argv(sys.argv[1:]), "cwd": str(Path.cwd())})
    return result

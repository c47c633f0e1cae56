"""`vlmocr evaluate | compare | clean | suspicious`: measured quality; the logic lives in
vlmocr.evaluation, vlmocr.text.clean and vlmocr.text.textquality."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..exceptions import ExitCode, UsageError
from ..progress import console
from ..runfolder import safe
from ..runfolder.record import JsonObject
from . import app, say_reading
from .output import TRUTH_HELP


def _stdout() -> Console:
    # Results go to stdout; wide enough that a table is not squeezed when piped to a file, unless
    # COLUMNS says how wide (rich reads it when no width is given).
    wide = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(file=sys.stdout, highlight=False, width=None if wide else 160)


# Figures never shrink to "2.80…": numeric columns do not wrap and the table has no vertical
# rules, so the evaluate and compare tables fit 80 columns; names and reasons wrap instead.
WIDE = 110  # at least this many columns: the macro rates get columns of their own


def _table(title: str, columns: Sequence[str], numeric: Sequence[str] = ()) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for col in columns:
        if col in numeric:
            table.add_column(col, justify="right", no_wrap=True)
        else:
            table.add_column(col, justify="left", overflow="fold")
    return table


def _folds(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


def _rules(path: Optional[Path]) -> Any:
    from ..text.clean import load_rules

    return load_rules(path)


def _pct(v: float | None) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.2f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"{ci[0] * 100:.2f}–{ci[1] * 100:.2f}"


def _dump(data: Any) -> None:
    # Pages' text and names reach the terminal: controls and bidi controls as JSON escapes (runfolder/safe.py).
    print(safe.json_shown(json.dumps(data, ensure_ascii=False, indent=2, default=str)), flush=True)


# --- evaluate ------------------------------------------------------------------------------


@app.command("evaluate")
def evaluate_command(
    run: Path = typer.Argument(..., help="Run directory."),
    truth: Optional[Path] = typer.Option(None, "--truth", help=TRUTH_HELP),
    no_truth: bool = typer.Option(False, "--no-truth", help="No ground truth: list suspicious pages (as `vlmocr suspicious`)."),
    clean: bool = typer.Option(False, "--clean", help="Score the cleaned layer (RUN/clean, or cleaned now in memory)."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML) for --clean."),
    fold: Optional[List[str]] = typer.Option(None, "--fold", help="Normalise both texts further: long_s, r_rotunda, superscript_e, "
                                             "ligatures, or an OCR-D level (ocrd1, ocrd2); diacritics, case, punct (repeatable)."),
    gate: Optional[List[str]] = typer.Option(None, "--gate", help="e.g. 'cer<=0.03', 'wer<=0.1', 'set:ehri_en:cer<=0.05', "
                                             "'unknown_words<=0.08' (the share of words not in their language's word "
                                             "list: also with --no-truth) (repeatable)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Let a gate pass although truth pages have no record."),
    worst: int = typer.Option(10, "--worst", help="List this many worst pages."),
    docs: bool = typer.Option(False, "--docs", help="Also print the per-document table (printed anyway for 10 documents or fewer)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95 % intervals (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    lang: Optional[str] = typer.Option(None, "--lang", help="With --no-truth: language of pages whose record names none."),
    json_out: bool = typer.Option(False, "--json", help="Print the full result as JSON on stdout."),
) -> int:
    """CER/WER per page, document, set and corpus against ground truth; gates as exit codes."""
    if no_truth:
        if truth is not None:
            raise UsageError("--no-truth takes no --truth")
        from ..evaluation import parse_gate
        from ..evaluation.spelling import NO_TRUTH_METRICS

        gates = [parse_gate(g) for g in gate or []]
        if needs_truth := [g.spec for g in gates if g.metric not in NO_TRUTH_METRICS]:
            raise UsageError(f"--no-truth: gate {needs_truth[0]!r} needs ground truth; without it only "
                             f"{', '.join(NO_TRUTH_METRICS)} can gate")
        return _suspicious(run, clean=clean, rules=rules, lang=lang, json_out=json_out, limit=worst, gates=gates)
    if truth is None:
        raise UsageError("give --truth DIR|CSV (or --no-truth for quality without ground truth)")
    from ..evaluation import check_gates, evaluate_run, parse_gate

    gates = [parse_gate(g) for g in gate or []]
    ev = evaluate_run(run, truth, clean=clean, rules=_rules(rules) if clean else None, folds=_folds(fold),
                      resamples=bootstrap, seed=seed)
    say_reading(run)  # once it is read: a mistake stays one line (exit 3)
    results = check_gates(ev, gates, allow_missing)
    layouts = ", ".join(f"{n} as {layout}" for layout, n in (ev.meta.get("truth_layouts") or {}).items())
    console.print(f"truth: {len(ev.pages)} pages ({layouts}); {len(ev.pages) - len(ev.missing)} matched a record of "
                  f"{run}", markup=False, highlight=False)
    for note in ev.notes:
        console.print(note, style="yellow", markup=False, highlight=False)
    if ev.missing:
        console.print(f"[yellow]{len(ev.missing)} of {len(ev.pages)} truth pages have no record in {run}[/yellow]")
    if ev.elsewhere:
        named = ", ".join(ev.elsewhere[:5]) + (f" … ({len(ev.elsewhere) - 5} more)" if len(ev.elsewhere) > 5 else "")
        console.print(f"truth for {len(ev.elsewhere)} document(s) not in this run, not counted: {escape(named)}",
                      highlight=False)
    if json_out:
        data = ev.as_dict(worst)
        data["gates"] = [r.as_dict() for r in results]
        data["passed"] = all(r.passed for r in results)
        _dump(data)
        for r in results:
            if not r.passed:
                console.print(f"[red]{r.message}")
    else:
        # A few documents: their rows by default (a person evaluating one letter wants its line).
        _print_evaluation(ev, worst, docs or len(ev.docs) <= FEW_DOCUMENTS)
        out = _stdout()
        for r in results:
            out.print(("PASS " if r.passed else "FAIL ") + r.message, style=None if r.passed else "bold red")
    return int(ExitCode.gate_failed if any(not r.passed for r in results) else ExitCode.ok)


FEW_DOCUMENTS = 10


def _print_evaluation(ev: Any, worst: int, docs: bool) -> None:
    out = _stdout()
    wide = out.width >= WIDE
    cleaned = f"; the clean layer folded {', '.join(ev.meta['clean_folds'])}" if ev.meta.get("clean_folds") else ""
    cols = ["set", "pages", "miss", "CER", "95 % CI", "WER", "95 % CI ", "+miss"]
    if wide:
        cols[4:4] = ["macro"]
        cols[7:7] = ["macro "]
    table = _table(f"{ev.meta.get('run')} — {ev.layer} layer, normalisation: {ev.normalisation}{cleaned} "
                   "(rates in %; +miss: CER with missing pages at 100 %)", cols, numeric=cols[1:])

    def row(name: str, a: Any, style: str | None = None) -> None:
        cells = [name, str(a.pages), str(a.missing), _pct(a.cer), _ci(a.cer_ci), _pct(a.wer), _ci(a.wer_ci),
                 _pct(a.cer_with_missing)]
        if wide:
            cells[4:4] = [_pct(a.cer_macro)]
            cells[7:7] = [_pct(a.wer_macro)]
        table.add_row(*cells, style=style)

    for name, agg in ev.sets.items():
        row(name, agg)
    row("all", ev.corpus, "bold")
    out.print(table)
    if docs:
        num = ("pages", "miss", "CER", "macro", "WER", "+miss")
        dt = _table("documents", ("doc",) + num, numeric=num)
        for name, a in ev.docs.items():
            dt.add_row(name, str(a.pages), str(a.missing), _pct(a.cer), _pct(a.cer_macro), _pct(a.wer),
                       _pct(a.cer_with_missing))
        out.print(dt)
    if worst > 0 and ev.corpus.scored:
        worst_num = ("page", "chars", "CER", "WER")
        wt = _table(f"worst {min(worst, ev.corpus.scored)} pages", ("doc", "page", "set", "status", "chars", "CER", "WER"),
                    numeric=worst_num)
        for p in ev.worst(worst):
            wt.add_row(p.doc_id, str(p.page), p.set, p.status, str(p.ref_chars), _pct(p.cer), _pct(p.wer))
        out.print(wt)
    if ev.missing:
        shown = ev.missing[:20]
        out.print(f"missing ({len(ev.missing)} truth pages without a record, counted as CER 100 % in 'w/ missing'):")
        for p in shown:
            out.print(f"  {p.doc_id} page {p.page}" + (f" ({p.set})" if p.set else ""))
        if len(ev.missing) > len(shown):
            out.print(f"  … and {len(ev.missing) - len(shown)} more (--json lists them all)")
    c = ev.corpus
    out.print(f"CER {_pct(c.cer)} % [{_ci(c.cer_ci)}] WER {_pct(c.wer)} % [{_ci(c.wer_ci)}] (micro; macro CER "
              f"{_pct(c.cer_macro)} %) over {c.scored} pages, "
              f"{c.missing} missing (CER with missing {_pct(c.cer_with_missing)} %)"
              + (f"; {ev.unscored_records} records without truth" if ev.unscored_records else "")
              + f"; normalisation: {ev.normalisation}{cleaned}")


# --- compare -------------------------------------------------------------------------------


@app.command("compare")
def compare_command(
    run_a: Path = typer.Argument(..., help="Run directory A (e.g. the bulk run)."),
    run_b: Path = typer.Argument(..., help="Run directory B (e.g. the gate run)."),
    truth: Optional[Path] = typer.Option(None, "--truth", help="Truth folder or CSV: the twins' scores are their CER against it."),
    tolerance_pp: float = typer.Option(0.1, "--tolerance-pp", help="Twins agree when their corpus scores differ by at "
                                       "most this many percentage points (seed 000: 0.1 after cleaning); pages differing "
                                       "more are listed."),
    raw: bool = typer.Option(False, "--raw", help="Compare the raw layers (default: cleaned)."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML)."),
    fold: Optional[List[str]] = typer.Option(None, "--fold", help="Normalise both texts further (as for evaluate: long_s, ocrd1, case…)."),
    limit: int = typer.Option(20, "--limit", help="Print at most this many differing pages."),
    json_out: bool = typer.Option(False, "--json", help="Print the full result as JSON on stdout."),
) -> int:
    """Two runs of the same pages as twins: exit 0 when their corpus scores (after cleaning) are
    within --tolerance-pp, 4 when further apart; pages that differ more are listed, not failed."""
    from ..evaluation import compare_runs

    if not tolerance_pp >= 0:
        raise UsageError("--tolerance-pp must be ≥ 0")
    tolerance = tolerance_pp / 100
    cmp = compare_runs(run_a, run_b, truth_path=truth, tolerance=tolerance, clean=not raw,
                       rules=None if raw else _rules(rules), folds=_folds(fold))
    flagged = cmp.flagged
    verdict = cmp.verdict
    assert verdict is not None  # compare_records always judges (no twins is a usage error)
    if json_out:
        _dump(cmp.as_dict())
        if not verdict.agree:
            console.print(f"[red]{verdict.line()} ({cmp.layer})")
    else:
        out = _stdout()
        if flagged:
            num = ("page", "A vs B", "CER A", "CER B")
            t = _table(f"pages differing by more than {tolerance_pp:g} pp ({cmp.layer}): information, not failure; "
                       "rates in % (A vs B: CER of B against A)", ("doc", "page", "A", "B") + num[1:] + ("reason",),
                       numeric=num)
            for d in flagged[:limit]:
                t.add_row(escape(safe.shown(d.doc_id)), str(d.page), d.status_a or "—", d.status_b or "—", _pct(d.cer_ab),
                          _pct(d.cer_a), _pct(d.cer_b), escape(safe.shown(d.reason)))
            out.print(t)
            if len(flagged) > limit:
                out.print(f"… and {len(flagged) - limit} more (--json lists them all)")
        c = cmp.corpus
        # micro: Σ edits / Σ characters, as evaluate's CER; macro: the mean of the page rates.
        vs_truth = (f"; against truth ({cmp.truth_pages} pages) CER micro A {_pct(c['cer_a'])} % B {_pct(c['cer_b'])} % "
                    f"(Δ {c['delta'] * 100:+.2f} pp), macro A {_pct(c['cer_a_macro'])} % "
                    f"B {_pct(c['cer_b_macro'])} %") if "cer_a" in c else ""
        out.print(f"Compared {len(cmp.pages)} pages ({cmp.layer}): {len(flagged)} differ by more than "
                  f"{tolerance_pp:g} pp, CER A vs B micro {_pct(c['cer_ab'])} % macro {_pct(c['cer_ab_macro'])} %"
                  f"{vs_truth}; normalisation: {cmp.meta.get('normalisation')}", soft_wrap=True)
        # The last line decides the exit code: the twins' corpus scores, not any one page.
        out.print(verdict.line(), soft_wrap=True)
    return int(ExitCode.ok if verdict.agree else ExitCode.gate_failed)


# --- clean ---------------------------------------------------------------------------------


@app.command("clean")
def clean_command(
    run: Optional[Path] = typer.Argument(None, help="Run directory."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML); keys left out keep the defaults."),
    show_rules: bool = typer.Option(False, "--show-rules", help="Print the default rules file and exit."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> int:
    """Write the cleaned layer RUN/clean/ from the raw records (pages.jsonl is only read)."""
    from ..text.clean import clean_run, default_rules_text

    if show_rules:
        print(default_rules_text(), end="", flush=True)
        return int(ExitCode.ok)
    if run is None:
        raise UsageError("give a run directory")
    result = clean_run(run, _rules(rules))
    say_reading(run)
    if json_out:
        _dump(result.as_dict())
    else:
        print(result.line(), flush=True)
    return int(ExitCode.ok)


# --- suspicious ----------------------------------------------------------------------------


@app.command("suspicious")
def suspicious_command(
    run: Path = typer.Argument(..., help="Run directory."),
    clean: bool = typer.Option(False, "--clean", help="Assess the cleaned layer."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML) for --clean."),
    lang: Optional[str] = typer.Option(None, "--lang", help="Language of pages whose record names none (else guessed)."),
    min_known: float = typer.Option(0.6, "--min-known", help="Suspicious below this share of dictionary words."),
    max_implausible: float = typer.Option(0.02, "--max-implausible", help="Suspicious above this share of implausible characters."),
    min_words: int = typer.Option(20, "--min-words", help="Pages with fewer words are not judged on known words."),
    max_suspicious: Optional[int] = typer.Option(None, "--max-suspicious", help="Exit 4 when more pages are suspicious."),
    all_pages: bool = typer.Option(False, "--all", help="List every page, not only the suspicious ones."),
    limit: int = typer.Option(50, "--limit", help="Print at most this many pages."),
    json_out: bool = typer.Option(False, "--json", help="Print the full result as JSON on stdout."),
) -> int:
    """Quality without ground truth: the run's quality signal (pages it calls suspect), and
    dictionary words and implausible characters per page."""
    return _suspicious(run, clean=clean, rules=rules, lang=lang, min_known=min_known, max_implausible=max_implausible,
                       min_words=min_words, max_suspicious=max_suspicious, all_pages=all_pages, limit=limit,
                       json_out=json_out)


def _suspicious(run: Path, *, clean: bool = False, rules: Optional[Path] = None, lang: Optional[str] = None,
                min_known: float = 0.6, max_implausible: float = 0.02, min_words: int = 20,
                max_suspicious: Optional[int] = None, all_pages: bool = False, limit: int = 50,
                json_out: bool = False, gates: Sequence[Any] = ()) -> int:
    from ..evaluation import run_records
    from ..text.signal import record_verdict
    from ..text.textquality import assess_records, summary, suspicion_rank

    records, layer = run_records(run, clean, _rules(rules) if clean else None)
    pages = assess_records((r for (d, p), r in records.items() if p > 0), lang=lang, min_words=min_words,
                           min_known=min_known, max_implausible=max_implausible)
    # The run's own rule (text/signal.py): the signal stored when the page was read, measured
    # again on a cleaned layer. A page it calls suspect is suspicious here too.
    signals: dict[tuple[str, int], Any] = {}
    for q in pages:
        quality, suspect = record_verdict(records[(q.doc_id, q.page)], remeasure=clean, lang=lang)
        signals[(q.doc_id, q.page)] = quality.as_dict() if quality else None
        if suspect and quality is not None:
            q.suspicious = True
            q.reasons.append(quality.reason())
    summ = summary(pages)
    flagged = sorted((q for q in pages if q.suspicious), key=suspicion_rank)
    from ..evaluation.score import check_spelling_gate
    from ..evaluation.spelling import measure_spelling

    # Measured only for a gate: the pages above were assessed already, and a second wordfreq pass
    # over every page is owed to no one who did not ask for the count.
    spelling = measure_spelling(records, lang=lang) if gates else None
    results = [check_spelling_gate(spelling, g) for g in gates] if spelling is not None else []

    def with_signal(q: Any) -> JsonObject:
        return {**q.as_dict(), "signal": signals.get((q.doc_id, q.page))}

    if json_out:
        _dump({"run": str(run), "layer": layer, **summ,
               "thresholds": {"min_known": min_known, "max_implausible": max_implausible, "min_words": min_words},
               "spelling": spelling["corpus"].as_dict() if spelling else None, "gates": [r.as_dict() for r in results],
               "suspicious_pages": [with_signal(q) for q in flagged],
               **({"pages": [with_signal(q) for q in pages]} if all_pages else {})})
    else:
        out = _stdout()
        shown = pages if all_pages else flagged
        if shown:
            t = Table(title=f"{'pages' if all_pages else 'suspicious pages'} — {run} ({layer} layer)")
            for col in ("doc", "page", "status", "score", "lang", "words", "known %", "implausible %", "sample",
                        "reasons"):
                t.add_column(col, justify="right" if col in ("page", "score", "words", "known %", "implausible %")
                             else "left")
            for q in shown[:limit]:
                signal = signals.get((q.doc_id, q.page)) or {}
                score = f"{signal['score']:.2f}" if isinstance(signal.get("score"), (int, float)) else "—"
                t.add_row(escape(safe.shown(q.doc_id)), str(q.page), q.status, score, f"{q.language or '?'} ({q.language_from})",
                          str(q.words),
                          _pct(q.known_share), _pct(q.implausible_share), escape(safe.shown(q.implausible_sample)),
                          escape(safe.shown("; ".join(q.reasons))))
            out.print(t)
            if len(shown) > limit:
                out.print(f"… and {len(shown) - limit} more (--json lists them all)")
        out.print(f"Suspicious: {summ['suspicious']} of {summ['pages']} pages "
                  f"(known words {_pct(summ['known_share'])} %, implausible characters "
                  f"{_pct(summ['implausible_share'])} %)")
        for r in results:
            out.print(("PASS " if r.passed else "FAIL ") + r.message, style=None if r.passed else "bold red")
    if max_suspicious is not None and summ["suspicious"] > max_suspicious:
        console.print(f"[red]{summ['suspicious']} suspicious pages, more than --max-suspicious {max_suspicious}")
        return int(ExitCode.gate_failed)
    if json_out:
        for r in results:
            if not r.passed:
                console.print(r.message, style="red", markup=False, highlight=False)
    return int(ExitCode.gate_failed if any(not r.passed for r in results) else ExitCode.ok)


# --- grid ----------------------------------------------------------------------------------


def _axis(values: Optional[str], cast: Any = str) -> list[Any]:
    if not values:
        return []
    try:
        return [cast(v.strip()) for v in values.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"bad grid values {values!r}") from None


@app.command("grid")
def grid_command(
    paths: List[str] = typer.Argument(None, help="The sample (default: the truth's own page images)."),
    truth: Path = typer.Option(..., "--truth", help="Truth folder or CSV to rank the cells by."),
    out: Path = typer.Option(..., "--out", "-o", help="Grid directory: one run directory per cell."),
    manifest: Optional[Path] = typer.Option(None, help="The sample as a manifest (doc_id,path[,pages,dpi])."),
    engine: Optional[str] = typer.Option(None, help="Comma-separated engines, e.g. tesseract,rapidocr."),
    ocr_engine: Optional[str] = typer.Option(None, help="Comma-separated OCR engines behind `auto`."),
    profile: Optional[str] = typer.Option(None, help="Comma-separated model profiles (a profile carries its prompt)."),
    model: Optional[str] = typer.Option(None, help="Comma-separated model names served by --endpoint."),
    dpi: Optional[str] = typer.Option(None, help="Comma-separated dpi values, e.g. 150,200,300."),
    longest_side: Optional[str] = typer.Option(None, help="Comma-separated longest sides in px."),
    lang: Optional[str] = typer.Option(None, help="Comma-separated Tesseract languages (use ; inside none)."),
    endpoint: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL for VLM cells."),
    workers: Optional[int] = typer.Option(None, help="CPU worker processes."),
    sample: Optional[int] = typer.Option(None, "--sample", help="Only this many truth pages, evenly spaced."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95 % intervals."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with run settings shared by every cell."),
    serve: Optional[str] = typer.Option(None, "--serve", help="Start one server for this profile, read every cell, stop it."),
    json_out: bool = typer.Option(False, "--json", help="Print the ranking as JSON on stdout."),
) -> int:
    """Read one sample under every combination of settings and rank the cells by CER."""
    from ..files import write_json_atomic
    from ..trials.grid import run_grid

    axes = {"engine": _axis(engine), "ocr_engine": _axis(ocr_engine), "profile": _axis(profile),
            "model": _axis(model), "dpi": _axis(dpi, float), "longest_side": _axis(longest_side, int),
            "lang": _axis(lang)}

    def on_cell(i: int, n: int, name: str, cell: Any) -> None:
        if cell is None:
            console.print(f"grid: cell {i}/{n} {name}: reading")
        else:
            c = cell.evaluation.corpus
            console.print(f"grid: cell {i}/{n} {name}: CER {_pct(c.cer)} % [{_ci(c.cer_ci)}], {c.missing} missing")

    from ..cluster.serve.running import serve_for_run
    from ..settings.config import RunConfig

    # --serve: one server for every cell (a prompt × dpi grid loads the model once); each cell's
    # profile brings its prompt and sizing, the served model answers them all.
    asked = RunConfig(serve=serve, out=out, endpoint=endpoint, model=(model if model and "," not in model else None))
    with serve_for_run(asked) as (served, _):
        base = {"endpoint": served.endpoint, "workers": workers}
        if serve:
            base.update(model=served.model, server_kind=served.server_kind)
            axes["model"] = []
            axes["profile"] = axes["profile"] or [serve]
        cells = run_grid(truth, out, axes, inputs=list(paths or []), manifest=manifest, base=base,
                         config_file=config, sample=sample, resamples=bootstrap, seed=seed, on_cell=on_cell)
    data = {"truth": str(truth), "out": str(out), "axes": {k: v for k, v in axes.items() if v},
            "cells": [c.as_dict() for c in cells]}
    write_json_atomic(out / "grid.json", data)
    if json_out:
        _dump(data)
        return int(ExitCode.ok)
    t = Table(title=f"grid {out} — ranked by CER (with missing pages counted), 95 % bootstrap CI")
    for col in ("rank", "cell", "pages", "missing", "CER", "CER CI", "WER", "read s", "≈ best"):
        t.add_column(col, justify="left" if col in ("cell", "≈ best") else "right")
    for c in cells:
        a = c.evaluation.corpus
        t.add_row(str(c.rank), c.name, str(a.scored), str(a.missing), _pct(a.cer), _ci(a.cer_ci), _pct(a.wer),
                  f"{c.read_seconds:.1f}", "yes" if c.near_best else "")
    out_console = _stdout()
    out_console.print(t)
    if cells:
        out_console.print(f"Best: {cells[0].name} (CER {_pct(cells[0].evaluation.corpus.cer)} %); "
                          f"{sum(c.near_best for c in cells)} of {len(cells)} cells within its interval")
    return int(ExitCode.ok)

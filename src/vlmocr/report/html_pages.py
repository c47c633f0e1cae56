"""The HTML pages of the report: index.html (summary, charts, review queues, the document
table) written in full, and the shells of review.html and doc.html that report.js fills from data/.
Everything that comes from a run is escaped here with ``html.escape``."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from ..runfolder.flags import flag_name, parse_flag
from ..runfolder.record import tier_went_on
from . import svg
from .gather import STATUS_ORDER, Page, ReportOptions, RunData, languages_read, status_group
from .review import queue_label

PREVIEW_ROWS = 100  # flagged pages listed on the index page


@dataclass
class IndexContext:
    title: str
    run: RunData
    statuses: dict[str, int]
    queues: dict[str, list[Page]]
    opts: ReportOptions
    cer_micro: float | None
    cer_macro: float | None
    cer_clean: float | None
    scored: int
    thumbs: int
    notes: list[str]
    generated: str


def _head(title: str, view: str) -> str:
    # The policy allows only files (the report's own): even if some markup slipped through, no
    # inline script or event handler would run, and nothing is loaded from the network.
    # `file:` is spelled out because some browsers do not count file:// URLs as 'self'.
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'self' file:; "
        "style-src 'self' file:; img-src 'self' file:; base-uri 'none'; form-action 'none'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{escape(title)}</title>\n"
        "<link rel=\"stylesheet\" href=\"assets/report.css\">\n</head>\n"
        f"<body data-view=\"{escape(view)}\">\n"
    )


def _nav(active: str, flagged: int | None = None) -> str:
    def link(href: str, label: str, key: str) -> str:
        cls = ' class="active"' if key == active else ""
        return f'<a href="{href}"{cls}>{escape(label)}</a>'

    review = "Review" + (f" ({flagged:,})" if flagged is not None else "")
    return (
        '<nav class="top">'
        + link("index.html#summary", "Summary", "summary")
        + link("index.html#documents", "Documents", "documents")
        + link("review.html#q=all&n=0", review, "review")
        + "</nav>\n"
    )


def shell_html(title: str, view: str) -> str:
    return (
        _head(title, view)
        + f'<header><h1><a href="index.html">{escape(title)}</a></h1>{_nav(view)}</header>\n'
        + '<main id="app"><p class="loading">Loading…</p></main>\n'
        + "<noscript><p class=\"note\">This view needs JavaScript (the summary on index.html does not).</p>"
        + "</noscript>\n"
        + '<script src="assets/report.js"></script>\n</body>\n</html>\n'
    )


def _card(label: str, value: str, ident: str, cls: str = "") -> str:
    return (f'<div class="card {escape(cls)}"><div class="v" id="{escape(ident)}">{escape(value)}</div>'
            f'<div class="k">{escape(label)}</div></div>')


def _throughput(ctx: IndexContext) -> tuple[float | None, float | None, int]:
    """(pages/h of the last invocation, pages/h over all invocations, invocations)."""
    summary = ctx.run.run_info.get("summary") or {}
    last = summary.get("pages_per_hour")
    history = [h.get("summary") or {} for h in ctx.run.run_info.get("history") or [] if isinstance(h, dict)]
    read = sum(float(h.get("read_now") or 0) for h in history)
    secs = sum(float(h.get("seconds") or 0) for h in history)
    overall = read / secs * 3600 if secs > 0 else None
    if overall is None and len(ctx.run.times) > 1:
        span = max(ctx.run.times) - min(ctx.run.times)
        overall = len(ctx.run.times) / span * 3600 if span > 0 else None
    return (float(last) if isinstance(last, (int, float)) else None), overall, len(history)


def _bins(values: list[float], edges: list[float], fmt: Callable[[float], str], last: str) -> list[tuple[str, int]]:
    counts = [0] * len(edges)
    for v in values:
        i = bisect.bisect_right(edges, v) - 1
        counts[max(0, min(i, len(edges) - 1))] += 1
    labels = [fmt(e) for e in edges[:-1]] + [last]
    return list(zip(labels, counts, strict=True))


def _charts(ctx: IndexContext) -> str:
    charts = []
    status_items = [(s, ctx.statuses.get(s, 0), f"st-{s}") for s in STATUS_ORDER if ctx.statuses.get(s)]
    charts.append(svg.hbars("Pages by status", status_items, chart_id="chart-status"))
    attempts = Counter(min(p.rec.attempt, 5) for p in ctx.run.pages)
    charts.append(svg.histogram("Attempts per page (final record)",
                                [(str(k) if k < 5 else "5+", attempts.get(k, 0)) for k in range(1, 6)],
                                chart_id="chart-attempts", x_title="attempt number"))
    if ctx.scored:
        cers = [p.cer for p in ctx.run.pages if p.cer is not None]
        edges = [0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
        bins = _bins(cers, edges, lambda e: f"≥{e * 100:g}%", "≥100%")
        charts.append(svg.histogram("CER per page (pages with truth)", bins, chart_id="chart-cer", cls="bar-cer",
                                    x_title="character error rate"))
    secs = [p.rec.seconds for p in ctx.run.pages if p.page > 0]
    if secs:
        edges = [0, 0.1, 0.5, 1, 2, 5, 10, 30, 60]
        charts.append(svg.histogram("Seconds per page", _bins(secs, edges, lambda e: f"{e:g}", "60+"),
                                    chart_id="chart-seconds", x_title="seconds (lower bound of bin)"))
    if len(ctx.run.times) > 1:
        ts = sorted(ctx.run.times)
        t0 = ts[0]
        step = max(1, len(ts) // 200)
        points = [(0.0, 0)] + [((ts[i] - t0) / 3600, i + 1) for i in range(0, len(ts), step)]
        if points[-1][1] != len(ts):
            points.append(((ts[-1] - t0) / 3600, len(ts)))
        charts.append(svg.cumulative("Records written over time", points, chart_id="chart-time", x_label="h"))
    return '<div class="charts">' + "".join(c for c in charts if c) + "</div>"


def tier_rows(pages: list[Page]) -> list[dict[str, Any]]:
    """The cascade's tiers over a run's pages (records with `tiers`): for tier k, the
    engine, the pages that reached it, those whose kept reading is its own, its engine seconds,
    and why pages went on from it (the status of its reading: suspect, empty …)."""
    rows: list[dict[str, Any]] = []
    for p in pages:
        tiers = p.rec.tiers or ()
        for k, t in enumerate(tiers):
            while len(rows) <= k:
                rows.append({"tier": len(rows) + 1, "engines": Counter(), "reached": 0, "kept": 0, "seconds": 0.0,
                             "went_on": Counter()})
            row = rows[k]
            row["engines"][str(t.get("engine") or "?")] += 1
            row["reached"] += 1
            row["seconds"] += float(t.get("seconds") or 0.0)
            if k + 1 < len(tiers):
                row["went_on"][tier_went_on(t)] += 1
        # The tier whose reading was kept: a later one read no better, an earlier one's stands.
        kept = next((k for k, t in enumerate(tiers) if t.get("engine") == p.rec.engine), None)
        if kept is not None:
            rows[kept]["kept"] += 1
    return rows


def _tiers_table(pages: list[Page]) -> str:
    rows = tier_rows(pages)
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{r['tier']}</td><td>{escape(', '.join(sorted(r['engines'])))}</td><td>{r['reached']:,}</td>"
        f"<td>{r['kept']:,}</td><td>{r['seconds']:,.1f}</td>"
        f"<td>{escape(', '.join(f'{n:,} {why}' for why, n in r['went_on'].most_common()) or '—')}</td></tr>"
        for r in rows)
    return ('<h3>Tiers</h3><table class="grid" id="tiers-table"><thead><tr><th>tier</th><th>engine</th>'
            "<th>pages read</th><th>pages kept</th><th>engine seconds</th><th>went on to the next tier</th></tr>"
            f"</thead><tbody>{body}</tbody></table>")


def flag_rows(pages: list[Page]) -> list[tuple[str, int, str]]:
    """(flag, pages carrying it, what it means) for the final pages, most frequent first: the
    flags parsed by the vocabulary (runfolder/flags.py), their values set aside."""
    counts: Counter[str] = Counter()
    means: dict[str, str] = {}
    for p in pages:
        for text in dict.fromkeys(p.rec.flags):
            flag, _ = parse_flag(text)
            name = flag_name(text)
            counts[name] += 1
            means.setdefault(name, flag.means if flag is not None else "not in this vlmocr's vocabulary")
    return [(name, n, means[name]) for name, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]


def _flags_table(pages: list[Page]) -> str:
    rows = flag_rows(pages)
    if not rows:
        return ""
    body = "".join(f"<tr><td><code>{escape(name)}</code></td><td>{n:,}</td><td>{escape(means)}</td></tr>"
                   for name, n, means in rows)
    return ('<h3>Flags</h3><table class="grid" id="flags-table"><thead><tr><th>flag</th><th>pages</th>'
            f"<th>what it says</th></tr></thead><tbody>{body}</tbody></table>")


def _settings_table(run_info: dict[str, Any], read: str = "") -> str:
    """The run's settings; `read`: the languages its pages were read as (a document's own from
    its manifest row beats the run's --lang, so the setting alone would say `eng` for Danish)."""
    settings = run_info.get("settings") or {}
    rows = []
    for key in ("engine", "ocr_engine", "model", "profile", "endpoint", "dpi", "longest_side", "lang", "workers",
                "concurrency", "shard"):
        if settings.get(key) not in (None, "", []):
            rows.append(("lang (run setting)" if key == "lang" else key, settings[key]))
    if read:
        rows.append(("pages read as", read))
    used = run_info.get("workers")
    if isinstance(used, dict) and used.get("count") is not None:
        # The workers the run started (memory may hold fewer than the setting asks): run.json's
        # `workers` block, with why.
        shown = f"{used['count']}" + (f" ({used['reason']})" if used.get("reason") else "")
        rows = [(k, v) for k, v in rows if k != "workers"] + [("workers", shown)]
    versions = run_info.get("versions") or {}
    if versions.get("vlmocr"):
        rows.append(("vlmocr", versions["vlmocr"]))
    for key in ("key", "git_commit", "host"):
        if run_info.get(key):
            rows.append((key.replace("_", " "), run_info[key]))
    inputs = settings.get("inputs")
    if inputs:
        shown = ", ".join(str(i) for i in inputs[:5]) + (" …" if len(inputs) > 5 else "")
        rows.append(("inputs", shown))
    if not rows:
        return ""
    body = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="kv" id="settings">{body}</table>'


def _snippet(text: str, n: int = 90) -> str:
    one = " ".join(text.split())
    return one[:n] + ("…" if len(one) > n else "")


def index_html(ctx: IndexContext) -> str:
    n_pages = len(ctx.run.pages)
    st = ctx.statuses
    groups: Counter[str] = Counter()
    for s, n in st.items():
        groups[status_group(s)] += n
    last_ph, overall_ph, invocations = _throughput(ctx)
    run_summary = ctx.run.run_info.get("summary") or {}
    missing = run_summary.get("missing")
    flagged = len(ctx.queues["all"])

    cards = [
        _card("pages", _num(n_pages), "n-pages"),
        _card("documents", _num(len(ctx.run.docs)), "n-docs"),
        _card("records (attempts)", _num(ctx.run.n_records), "n-records"),
        _card("ok", _num(groups["ok"]), "n-ok", "st-ok"),
        _card("fallback", _num(groups["fallback"]), "n-fallback", "st-fallback"),
        _card("review", _num(groups["review"]), "n-review", "st-loop"),
        _card("failed", _num(groups["failed"]), "n-failed", "st-error"),
        _card("flagged", _num(flagged), "n-flagged"),
    ]
    if isinstance(missing, int):
        cards.append(_card("missing (run.json)", _num(missing), "n-missing"))
    cards.append(_card("pages/h (last run)", _num(round(last_ph)) if last_ph is not None else "—", "n-pph"))
    if overall_ph is not None and invocations != 1:
        cards.append(_card(f"pages/h ({invocations} runs)" if invocations else "pages/h (records)",
                           _num(round(overall_ph)), "n-pph-all"))
    if ctx.opts.truth is not None:
        cards.append(_card("CER (micro)", _pct(ctx.cer_micro), "n-cer", "cer"))
        if ctx.cer_clean is not None:
            cards.append(_card("CER cleaned", _pct(ctx.cer_clean), "n-cer-clean", "cer"))

    status_rows = "".join(
        f'<tr data-status="{escape(s)}"><td><span class="badge st-{escape(s)}">{escape(s)}</span></td>'
        f'<td class="num" data-count="{st.get(s, 0)}">{st.get(s, 0):,}</td>'
        f'<td class="num">{(st.get(s, 0) / n_pages * 100 if n_pages else 0):.1f} %</td>'
        f'<td>{escape(status_group(s))}</td></tr>'
        for s in STATUS_ORDER
    )
    status_table = (
        '<table class="grid" id="status-table"><thead><tr><th>status</th><th>pages</th><th>share</th>'
        f"<th>group</th></tr></thead><tbody>{status_rows}</tbody>"
        f'<tfoot><tr><th>all</th><td class="num" id="status-total">{n_pages:,}</td><td></td><td></td></tr></tfoot>'
        "</table>"
    )

    truth_html = ""
    if ctx.opts.truth is not None:
        truth_html = (
            '<h3>Measured quality</h3><table class="kv" id="quality">'
            f"<tr><th>truth</th><td>{escape(str(ctx.opts.truth))}</td></tr>"
            f"<tr><th>truth pages</th><td>{ctx.run.truth_pages:,}</td></tr>"
            f'<tr><th>scored (have a record)</th><td id="q-scored">{ctx.scored:,}</td></tr>'
            f'<tr><th>missing (no record)</th><td id="q-missing">{len(ctx.run.missing_truth):,}</td></tr>'
            f'<tr><th>CER micro (Σ edits / Σ truth chars)</th><td id="q-cer">{_pct(ctx.cer_micro)}</td></tr>'
            f"<tr><th>CER macro (mean of pages)</th><td>{_pct(ctx.cer_macro)}</td></tr>"
            + (f"<tr><th>CER of the cleaned layer</th><td>{_pct(ctx.cer_clean)}</td></tr>" if ctx.cer_clean is not None
               else "")
            + f"<tr><th>review threshold</th><td>CER &gt; {ctx.opts.cer_threshold * 100:g} %</td></tr></table>"
        )
        if ctx.run.missing_truth:
            shown = ", ".join(f"{d} p{p}" for d, p in ctx.run.missing_truth[:10])
            more = " …" if len(ctx.run.missing_truth) > 10 else ""
            truth_html += f'<p class="note">Truth pages without a record: {escape(shown + more)}</p>'

    queue_links = "".join(
        f'<li><a href="review.html#q={escape(q)}&amp;n=0" data-queue="{escape(q)}">'
        f'<span class="badge st-{escape(q)}">{escape(queue_label(q, ctx.opts.cer_threshold))}</span></a> '
        f'<span class="num" data-count="{len(ps)}">{len(ps):,}</span></li>'
        for q, ps in ctx.queues.items() if q != "all" and ps
    )
    preview = []
    for p in ctx.queues["all"][:PREVIEW_ROWS]:
        doc = ctx.run.docs[p.d]
        reasons = " ".join(f'<span class="badge st-{escape(r)}">{escape(r)}</span>' for r in p.reasons)
        cer = f"<td class=\"num\">{_pct(p.cer, 1)}</td>" if ctx.opts.truth is not None else ""
        preview.append(
            f'<tr><td class="num">{(p.ordinal or 0) + 1}</td>'
            f'<td><a href="review.html#q=all&amp;n={p.ordinal}">{escape(doc.doc_id)}</a></td>'
            f'<td class="num">{p.page}</td><td>{reasons}</td>{cer}'
            f'<td class="snip">{escape(_snippet(ctx.run.text(p) or p.rec.error or ""))}</td></tr>'
        )
    preview_html = ""
    if preview:
        more = (f'<p class="note">The first {PREVIEW_ROWS} of {flagged:,} are listed; '
                f'<a href="review.html#q=all&amp;n=0">open the review</a> to go through all of them '
                f"(keys j / k or ← / →).</p>" if flagged > PREVIEW_ROWS else "")
        cer_th = "<th>CER</th>" if ctx.opts.truth is not None else ""
        preview_html = (
            '<table class="grid" id="flagged-table"><thead><tr><th>#</th><th>document</th><th>page</th>'
            f"<th>why</th>{cer_th}<th>text</th></tr></thead><tbody>{''.join(preview)}</tbody></table>{more}"
        )

    clean_note = ""
    if ctx.run.clean_present:
        clean_note = f'<p class="note">Cleaned layer: RUN/clean ({escape(ctx.run.clean_state or "present")}).</p>'
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in ctx.notes)
    doc_cols = [("doc", "document"), ("lang", "lang"), ("pages", "pages"), ("ok", "ok"), ("fallback", "fallback"),
                ("review", "review"), ("failed", "failed"), ("flagged", "flagged"), ("retried", "retried"),
                ("seconds", "seconds")]
    if ctx.opts.truth is not None:
        doc_cols.append(("cer", "CER"))
        if ctx.run.clean_present:
            doc_cols.append(("cer_clean", "CER cleaned"))
    head = "".join(f'<th data-col="{c}" tabindex="0" role="columnheader" aria-sort="none">{escape(label)}</th>'
                   for c, label in doc_cols)

    return (
        _head(ctx.title, "index")
        + f'<header><h1><a href="index.html">{escape(ctx.title)}</a></h1>{_nav("summary", flagged)}</header>\n'
        + "<main>\n"
        + '<section id="summary"><h2>Summary</h2>'
        + f'<p class="sub">Run <code>{escape(str(ctx.run.run_dir))}</code> · report generated {escape(ctx.generated)}'
        + f" · {ctx.thumbs:,} thumbnails</p>"
        + notes
        + f'<div class="cards">{"".join(cards)}</div>'
        + f'<div class="two">{status_table}{_settings_table(ctx.run.run_info, languages_read(ctx.run.pages))}</div>'
        + truth_html
        + clean_note
        + _tiers_table(ctx.run.pages)
        + _flags_table(ctx.run.pages)
        + _charts(ctx)
        + "</section>\n"
        + '<section id="review"><h2>Review queue</h2>'
        + (f'<p>{flagged:,} flagged pages (every status but ok'
           + (f", and CER above {ctx.opts.cer_threshold * 100:g} %" if ctx.opts.truth is not None else "")
           + '). <a class="button" href="review.html#q=all&amp;n=0" id="start-review">Start the review</a> '
           "(keys: j / k or ← / → between flagged pages, in the review view).</p>"
           if flagged else "<p>No flagged pages.</p>")
        + (f'<ul class="queues">{queue_links}</ul>' if queue_links else "")
        + preview_html
        + "</section>\n"
        + '<section id="documents"><h2>Documents</h2>'
        + '<div class="tools"><input id="doc-filter" type="search" placeholder="filter documents" '
        + 'aria-label="filter documents"> <label><input type="checkbox" id="doc-flagged-only"> '
        + 'flagged only</label> <span id="doc-count"></span></div>'
        + f'<table class="grid sortable" id="doc-table"><thead><tr>{head}</tr></thead><tbody></tbody></table>'
        + '<div class="pager" id="doc-pager"></div>'
        + '<noscript><p class="note">The document table needs JavaScript.</p></noscript>'
        + "</section>\n</main>\n"
        + '<script src="assets/report.js"></script>\n</body>\n</html>\n'
    )


def _pct(v: float | None, digits: int = 2) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * 100:.{digits}f} %"


def _num(n: float | None) -> str:
    if n is None:
        return "—"
    if isinstance(n, float):
        return f"{n:,.1f}"
    return f"{n:,}"

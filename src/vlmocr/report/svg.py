"""Small inline SVG charts (no plotting library): bars, histograms and a cumulative line.

Every label is escaped; colours come from CSS classes so the report's stylesheet decides."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH = 460
BAR_H = 22


def _fmt(n: float) -> str:
    if isinstance(n, float) and not n.is_integer():
        return f"{n:.3g}"
    n = int(n)
    return f"{n:,}".replace(",", "\u2009")


def hbars(title: str, items: Sequence[tuple[str, int, str]], *, chart_id: str) -> str:
    """Horizontal bars: (label, value, css class) each; the value is written at the bar's end."""
    if not items:
        return ""
    top = max(v for _, v, _ in items) or 1
    label_w, gap = 110, 6
    bar_w = WIDTH - label_w - 70
    height = len(items) * (BAR_H + gap) + 30
    parts = [_open(chart_id, height, title)]
    y = 26
    for label, value, cls in items:
        w = max(1.0 if value else 0.0, bar_w * value / top)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + BAR_H * 0.7:.1f}" text-anchor="end" class="lbl">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{BAR_H}" class="bar {escape(cls)}">'
            f"<title>{escape(label)}: {value}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + BAR_H * 0.7:.1f}" class="val">{_fmt(value)}</text>'
        )
        y += BAR_H + gap
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, bins: Sequence[tuple[str, int]], *, chart_id: str, cls: str = "bar-neutral",
              x_title: str = "") -> str:
    """Vertical bars over labelled bins (the labels are drawn under the bars)."""
    if not bins:
        return ""
    top = max(v for _, v in bins) or 1
    height, base, left = 220, 170, 10
    slot = (WIDTH - 2 * left) / len(bins)
    bw = max(4.0, slot * 0.78)
    parts = [_open(chart_id, height, title)]
    for i, (label, value) in enumerate(bins):
        h = (base - 40) * value / top
        if value and h < 1:
            h = 1
        x = left + i * slot + (slot - bw) / 2
        parts.append(
            f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bw:.1f}" height="{h:.1f}" class="bar {escape(cls)}">'
            f"<title>{escape(label)}: {value}</title></rect>"
            f'<text x="{x + bw / 2:.1f}" y="{base - h - 4:.1f}" text-anchor="middle" class="val">{_fmt(value)}</text>'
            f'<text x="{x + bw / 2:.1f}" y="{base + 15}" text-anchor="middle" class="tick">{escape(label)}</text>'
        )
    parts.append(f'<line x1="{left}" y1="{base}" x2="{WIDTH - left}" y2="{base}" class="axis"/>')
    if x_title:
        parts.append(f'<text x="{WIDTH / 2}" y="{base + 36}" text-anchor="middle" class="tick">{escape(x_title)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def cumulative(title: str, points: Sequence[tuple[float, int]], *, chart_id: str, x_label: str = "") -> str:
    """A step line of a running total over x (e.g. hours since the first page finished)."""
    if len(points) < 2:
        return ""
    height, base, left, right = 220, 175, 48, 12
    x0, x1 = points[0][0], points[-1][0]
    span = (x1 - x0) or 1.0
    top = max(p[1] for p in points) or 1
    sx = (WIDTH - left - right) / span
    sy = (base - 30) / top
    coords = " ".join(f"{left + (x - x0) * sx:.1f},{base - y * sy:.1f}" for x, y in points)
    parts = [
        _open(chart_id, height, title),
        f'<polyline points="{coords}" class="line"/>',
        f'<line x1="{left}" y1="{base}" x2="{WIDTH - right}" y2="{base}" class="axis"/>',
        f'<line x1="{left}" y1="{base}" x2="{left}" y2="28" class="axis"/>',
        f'<text x="{left - 4}" y="{base - top * sy + 4:.1f}" text-anchor="end" class="tick">{_fmt(top)}</text>',
        f'<text x="{left - 4}" y="{base + 4}" text-anchor="end" class="tick">0</text>',
        f'<text x="{left}" y="{base + 16}" class="tick">0</text>',
        (f'<text x="{WIDTH - right}" y="{base + 16}" text-anchor="end" class="tick">{escape(_fmt(round(span, 2)))} '
         f"{escape(x_label)}</text>"),
        "</svg>",
    ]
    return "".join(parts)


def _open(chart_id: str, height: int, title: str) -> str:
    return (
        f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
        f'<text x="4" y="15" class="ttl">{escape(title)}</text>'
    )

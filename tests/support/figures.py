"""Documents with figures and the run that grounds them: a three-page PDF whose pages carry figures
at known places (each a raster strip with its own page code, so the describing stand-in answers
each crop with its own text), the grounded answers a model gives for them, and a real `vlmocr run`
with deepseek-ocr against the test server (tests/figures/, the SLURM describe job, the
real-server lane)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image

from support.cli import run_cli
from vlmocr.runfolder.rundir import FIGURES_FILE
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import draw_code, expected_text, make_coded_image

PAGE_W, PAGE_H = 612.0, 792.0  # US letter, points
DPI = 200.0
SCALE = DPI / 72

# Figures in points, top-left origin: (figure code, x, y, w, h, block type).
FIGURES = {
    101: [(9001, 72.0, 380.0, 300.0, 200.0, "image")],
    102: [(9002, 72.0, 330.0, 230.0, 150.0, "image"), (9003, 320.0, 520.0, 220.0, 180.0, "Chart")],
}
ICON = (500.0, 700.0, 16.0, 16.0)  # on page 1: an icon below --min-area
DESCRIPTIONS = {
    9001: "A bar chart of sales by year: three bars rising from left to right.",
    9002: "A framed drawing with four grey bars of different heights.",
    9003: "A chart with four bars; the second one is the tallest.",
}


def g(x: float, y: float, w: float, h: float) -> list[int]:
    """A box in points → the 0–1000 grid a grounded model answers in."""
    return [round(x / PAGE_W * 1000), round(y / PAGE_H * 1000), round((x + w) / PAGE_W * 1000),
            round((y + h) / PAGE_H * 1000)]


def px(x: float, y: float, w: float, h: float) -> list[float]:
    return [x * SCALE, y * SCALE, (x + w) * SCALE, (y + h) * SCALE]


def block(kind: str, box: list[int], text: str = "") -> str:
    return f"<|ref|>{kind}<|/ref|><|det|>[[{box[0]}, {box[1]}, {box[2]}, {box[3]}]]<|/det|>\n{text}\n\n"


def grounded_answers() -> dict[int, str]:
    (f1,) = FIGURES[101]
    f2, f3 = FIGURES[102]
    return {
        101: (block("title", [118, 60, 800, 90], "# Annual report")
              + block("text", [118, 100, 880, 180], "Sales grew in every year of the period.")
              + block("image", g(*f1[1:5]))
              + block("image_caption", [118, 740, 700, 760], "Figure 1: Sales by year.")
              + block("image", g(*ICON))
              + block("text", [118, 900, 880, 950], "Contact us for details.")),
        102: (block("text", [118, 100, 880, 180], "Two figures follow.")
              + block("image", g(*f2[1:5]))
              + block("text", [118, 620, 880, 650], "Between the figures.")
              + block(f3[5], g(*f3[1:5]))),
        103: "A page of text without figures.",
    }


def figure_strip(code: int, w_pt: float, h_pt: float) -> Image.Image:
    """A raster strip carrying the figure's code (what the describing server decodes)."""
    img = Image.new("L", (round(w_pt * SCALE), round(h_pt * SCALE)), "white")
    draw_code(img, code)
    return img


def make_figure_pdf(path: Path) -> Path:
    """Three pages: each a scanned-looking page (page code + text) with figures drawn on top."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    c = Canvas(str(path), pagesize=(PAGE_W, PAGE_H), invariant=1)

    def image(img: Image.Image, x: float, y: float, w: float, h: float) -> None:
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        buf.seek(0)
        c.drawImage(ImageReader(buf), x, PAGE_H - y - h, w, h)

    for code in (101, 102, 103):
        image(make_coded_image(code, (1275, 1650)), 0, 0, PAGE_W, PAGE_H)
        for fig_code, x, y, w, h, _kind in FIGURES.get(code, []):
            # The frame's outer edge is the figure's box (a 2 pt line drawn 1 pt inside it).
            c.setLineWidth(2)
            c.setStrokeColorRGB(0, 0, 0)
            c.rect(x + 1, PAGE_H - y - h + 1, w - 2, h - 2, stroke=1, fill=0)
            strip_h = h * 0.3
            image(figure_strip(fig_code, w - 8, strip_h), x + 4, y + 4, w - 8, strip_h)
            c.setFillColorRGB(0.45, 0.45, 0.45)
            bar_w = (w - 40) / 4
            for i, share in enumerate((0.3, 0.6, 0.45, 0.2) if fig_code != 9001 else (0.2, 0.4, 0.6, 0.0)):
                bar_h = (h - strip_h - 24) * share
                c.rect(x + 12 + i * (bar_w + 5), PAGE_H - y - h + 10, bar_w, bar_h, stroke=0, fill=1)
        if code == 101:
            c.setFillColorRGB(0, 0, 0)
            x, y, w, h = ICON
            c.circle(x + w / 2, PAGE_H - y - h / 2, w / 2, stroke=0, fill=1)
        c.showPage()
    c.save()
    return path


SCRIPT = {**grounded_answers(), **DESCRIPTIONS}


SERVED = "Qwen/Qwen3-VL-8B-Instruct"  # the qwen3-vl profile's repo id: the served name


def grounded_run(root: Path) -> Path:
    """A real page run with figure blocks: `vlmocr run` with deepseek-ocr against the test server."""
    pdf = make_figure_pdf(root / "report.pdf")
    run = root / "run"
    with serve_in_process(ServerConfig(answer="script", script=SCRIPT, retry_after=0)) as server:
        res = run_cli("run", str(pdf), "--out", str(run), "--endpoint", server.url, "--profile", "deepseek-ocr",
                      "--engine", "openai", "--workers", "2", "--request-timeout", "10",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode == 0, res.stderr
    return run


def expected_descriptions() -> dict[tuple[int, int], str]:
    """(page, figure) → what the stand-in answers for that figure's crop (the icon is skipped)."""
    return {(page, i): expected_text(code) for page, (_, figs) in enumerate(sorted(FIGURES.items()), 1)
            for i, (code, *_rest) in enumerate(figs, 1)}


def figure_finals(run: Path) -> dict[tuple[int, int], dict]:
    path = run / FIGURES_FILE
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return {(r["page"], r["figure"]): r for r in recs}

"""Shared fixtures: real documents made on the fly (reportlab, Pillow, pypdfium2), the
ground-truth pages in ../shared/gt, and a helper that runs the real `vlmocr` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
STRICT = os.environ.get("VLMOCR_TEST_STRICT") == "1"


def need(condition: bool, what: str) -> None:
    """Skip when a component is missing — but fail in CI (VLMOCR_TEST_STRICT=1)."""
    if not condition:
        if STRICT:
            pytest.fail(f"missing component in strict mode: {what}")
        pytest.skip(f"missing: {what}")


@pytest.fixture
def gt() -> Path:
    need(GT.is_dir(), f"ground truth at {GT}")
    return GT


def make_text_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A born-digital PDF with a real text layer; returns the path."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for lines in pages:
        y = 780
        for line in lines:
            c.setFont("Helvetica", 12)
            c.drawString(72, y, line)
            y -= 18
        c.showPage()
    c.save()
    return path


def text_image(lines: list[str], size: tuple[int, int] = (900, 1200), font_size: int = 34) -> Image.Image:
    img = Image.new("L", size, 255)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=font_size)
    y = 60
    for line in lines:
        draw.text((60, y), line, fill=0, font=font)
        y += int(font_size * 1.6)
    return img


def make_scan_pdf(path: Path, pages: list[list[str]], size: tuple[int, int] = (900, 1200)) -> Path:
    """An image-only PDF (no text layer): what a scanner produces."""
    imgs = [text_image(lines, size) for lines in pages]
    imgs[0].save(path, save_all=True, append_images=imgs[1:], resolution=100)
    return path


def page_lines(doc: int, page: int) -> list[str]:
    return [f"Document {doc} page {page}", "The quick brown fox", f"jumps over {page * 7} lazy dogs"]


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout
    )


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """The real `vlmocr` command in this process (a subprocess costs a second of imports)."""
    import contextlib
    import io

    from vlmocr.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(["vlmocr", *args], code, out.getvalue(), err.getvalue())


def read_records(run_dir: Path) -> list[dict]:
    """The records of RUN/pages.jsonl as written, without each line's check."""
    from vlmocr.store import CHECK_KEY

    lines = (run_dir / "pages.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    for rec in records:
        rec.pop(CHECK_KEY, None)
    return records


def finals(run_dir: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for rec in read_records(run_dir):
        out[(rec["doc_id"], rec["page"])] = rec
    return out


@pytest.fixture
def tesseract() -> str:
    exe = shutil.which("tesseract")
    need(exe is not None, "tesseract binary (apt-get install tesseract-ocr)")
    return exe  # type: ignore[return-value]

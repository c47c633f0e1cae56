"""Regenerate samples/ (committed): a born-digital PDF, an image-only "scanned" PDF and a
TIFF/PNG made from ../shared/gt pages (CC-BY-4.0 / Apache-2.0, see samples/README.md).

    python scripts/make_samples.py [--gt ../shared/gt]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

HERE = Path(__file__).resolve().parent.parent
SAMPLES = HERE / "samples"
# Between the pages of a truth .txt: a form feed on a line of its own, as `vlmocr evaluate` reads it.
PAGE_BREAK = "\n\f\n"

BORN_DIGITAL = [
    [
        "vlmocr sample: a born-digital page",
        "This PDF carries a real text layer, so vlmocr reads it exactly and instantly.",
        "Pages without a usable text layer are sent to the OCR engine instead.",
        "Accents survive: café, naïve, Ærø, Škoda, Übermaß.",
    ],
    [
        "Second page of the born-digital sample.",
        "Every page ends with one record in pages.jsonl and an honest status.",
        "A run that dies is resubmitted and picks up exactly where it stopped.",
    ],
]


def make_born_digital(path: Path) -> None:
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("vlmocr born-digital sample")
    for lines in BORN_DIGITAL:
        y = 780
        for line in lines:
            c.setFont("Helvetica", 12)
            c.drawString(72, y, line)
            y -= 20
        c.showPage()
    c.save()
    path.with_suffix(".txt").write_text(PAGE_BREAK.join("\n".join(p) for p in BORN_DIGITAL) + "\n", encoding="utf-8")


def scale(img: Image.Image, longest: int) -> Image.Image:
    f = longest / max(img.size)
    if f >= 1:
        return img
    return img.resize((round(img.width * f), round(img.height * f)), Image.Resampling.LANCZOS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gt", type=Path, default=HERE.parent / "shared" / "gt")
    args = ap.parse_args()
    SAMPLES.mkdir(exist_ok=True)
    make_born_digital(SAMPLES / "born-digital.pdf")
    # An image-only "scanned" PDF: two typewritten EHRI pages at 150 dpi-equivalent.
    pages = ["ehri_en/EHRI-DR-19400712-US_03", "ehri_en/EHRI-BF-19380810_EN_01"]
    imgs = [scale(Image.open(args.gt / f"{p}.jpg").convert("L"), 1600) for p in pages]
    imgs[0].save(SAMPLES / "scanned-typewritten.pdf", save_all=True, append_images=imgs[1:], resolution=150)
    truth = PAGE_BREAK.join((args.gt / f"{p}.txt").read_text(encoding="utf-8").strip() for p in pages)
    (SAMPLES / "scanned-typewritten.txt").write_text(truth + "\n", encoding="utf-8")
    # A PNG of a French typescript page.
    tap = "tapus/tapus_bljd_DSN113_00027"
    scale(Image.open(args.gt / f"{tap}.jpg").convert("L"), 1600).save(SAMPLES / "typescript-fr.png", optimize=True)
    shutil.copy(args.gt / f"{tap}.txt", SAMPLES / "typescript-fr.txt")
    # A two-frame TIFF (every frame is a page): Danish typewritten report pages.
    da = sorted((args.gt / "ehri_da").glob("*.jpg"))[:2]
    frames = [scale(Image.open(p).convert("L"), 1400) for p in da]
    frames[0].save(SAMPLES / "report-da.tif", save_all=True, append_images=frames[1:], compression="tiff_deflate", dpi=(150, 150))
    (SAMPLES / "report-da.txt").write_text(
        PAGE_BREAK.join(p.with_suffix(".txt").read_text(encoding="utf-8").strip() for p in da) + "\n", encoding="utf-8")
    for f in sorted(SAMPLES.iterdir()):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()

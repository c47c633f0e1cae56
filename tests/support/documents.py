"""Real documents made on the fly: born-digital PDFs with a text layer (reportlab), images of
text (Pillow) and image-only PDFs, as a scanner makes them."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

WORDS = ("archive letter river council harvest railway winter printer harbour village market bridge "
         "teacher garden engine lantern orchard mill chapel ledger").split()


def make_text_pdf(path: Path, pages: list[list[str]], font: str = "Helvetica") -> Path:
    """A born-digital PDF with a real text layer (in `font`, a name reportlab knows); returns the path."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for lines in pages:
        y = 780
        for line in lines:
            c.setFont(font, 12)
            c.drawString(72, y, line)
            y -= 18
        c.showPage()
    c.save()
    return path


def make_hostile_text_pdf(path: Path, pages: list[list[str]], hostile: dict[str, str]) -> Path:
    """A born-digital PDF whose text layer says other characters than its glyphs show, as broken
    and hostile PDFs do: the embedded font's ToUnicode map sends each glyph of `hostile`'s keys
    (letters) to its value (one UTF-16 code unit: a control character, a bidi override …), so
    PDFium's text layer holds those characters where the letters are printed."""
    import pikepdf
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if "VlmocrDejaVu" not in pdfmetrics.getRegisteredFontNames():  # embedded, with a ToUnicode map
        pdfmetrics.registerFont(TTFont("VlmocrDejaVu", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"))
    make_text_pdf(path, pages, font="VlmocrDejaVu")
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        for page in pdf.pages:
            for _, f in page.Resources.Font.items():
                if "/ToUnicode" not in f:
                    continue
                cmap = f.ToUnicode.read_bytes().decode("latin-1")
                for letter, char in hostile.items():
                    cmap = cmap.replace(f"<{ord(letter):02X}> <{ord(letter):04X}>", f"<{ord(letter):02X}> <{ord(char):04X}>")
                f.ToUnicode.write(cmap.encode("latin-1"))
        pdf.save(path)
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


def body_lines(doc: int, page: int, n: int = 5) -> list[str]:
    """Lines long enough for a usable text layer, different per document and page."""
    out = []
    for i in range(n):
        words = [WORDS[(doc * 7 + page * 3 + i * 5 + k) % len(WORDS)] for k in range(8)]
        out.append(f"Doc{doc} page {page} line {i}: " + " ".join(words))
    return out


def make_doc(folder: Path, name: str, doc: int, pages: int, extra: dict[int, list[str]] | None = None) -> Path:
    content = []
    for p in range(1, pages + 1):
        lines = list((extra or {}).get(p, [])) + body_lines(doc, p)
        content.append(lines)
    folder.mkdir(parents=True, exist_ok=True)
    return make_text_pdf(folder / name, content)


def save_turned(page: Path, folder: Path, turns: dict[str, Image.Transpose | None], mode: str | None = None) -> None:
    """`page` saved into `folder` as NAME.png for each NAME: turned by its transposition (None: as it
    is), in `mode` when given — a box of scans fed every which way."""
    with Image.open(page) as im:
        img = im.convert(mode) if mode else im.copy()
    for name, how in turns.items():
        (img.transpose(how) if how is not None else img).save(folder / f"{name}.png")


def save_tier_scans(gt: Path, folder: Path) -> Path:
    """Three scans for the cascade's tests (issue 30), read with English data: an English
    typescript Tesseract reads well (clear.jpg), the same kind of page scanned at a third of its
    resolution — shrunk and enlarged again — which Tesseract reads at ~30 % CER and its signal
    fails (english.png), and blank paper (blank.png). Returns the folder."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(gt / "ehri_en" / "EHRI-DR-19390519-US_03.jpg", folder / "clear.jpg")
    with Image.open(gt / "ehri_en" / "EHRI-BF-19380509b_EN_02.jpg") as im:
        page = im.convert("L")
        w, h = page.size
        page.resize((w // 3, h // 3), Image.Resampling.BILINEAR).resize((w, h), Image.Resampling.BILINEAR).save(
            folder / "english.png")
    Image.new("L", (1000, 1400), 250).save(folder / "blank.png")
    return folder


def make_placed_scan_pdf(path: Path, pages: list[dict]) -> Path:
    """A scan PDF as scanning software writes them in all their variety: each page one greyscale
    image (`image`, a PIL image) shown at `dpi`, on a sheet `margin` pt larger all round, the page
    turned by `rotate` (/Rotate, clockwise) and the image drawn through a Form XObject when `form`
    — so the page rendered at any dpi is never the image's own pixels. Returns the path."""
    import zlib

    import pikepdf

    pdf = pikepdf.new()
    for spec in pages:
        grey = spec["image"].convert("L")
        dpi, margin = spec["dpi"], spec.get("margin", 0.0)
        w_pt, h_pt = grey.width * 72 / dpi, grey.height * 72 / dpi
        image = pikepdf.Stream(pdf, zlib.compress(grey.tobytes()), Type=pikepdf.Name.XObject,
                               Subtype=pikepdf.Name.Image, Width=grey.width, Height=grey.height,
                               ColorSpace=pikepdf.Name.DeviceGray, BitsPerComponent=8,
                               Filter=pikepdf.Name.FlateDecode)
        draw = f"q {w_pt:.4f} 0 0 {h_pt:.4f} {margin:.4f} {margin:.4f} cm /Im0 Do Q".encode()
        resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=image))
        sheet = [0, 0, w_pt + 2 * margin, h_pt + 2 * margin]
        if spec.get("form"):
            form = pikepdf.Stream(pdf, draw, Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Form, BBox=sheet,
                                  Resources=resources)
            resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(Fm0=form))
            draw = b"q 1 0 0 1 0 0 cm /Fm0 Do Q"
        page = pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=sheet, Resources=resources,
                                  Contents=pikepdf.Stream(pdf, draw))
        if spec.get("rotate"):
            page.Rotate = spec["rotate"]
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)
    return path

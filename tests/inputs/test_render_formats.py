"""The image formats digitisation projects deliver (issue 19, point 12): JPEG 2000 (.jp2 .j2k
.jpf .jpx), BMP, GIF, the PNM family and DjVu, made for real (Pillow; DjVuLibre's c44 and djvm)
and read end to end by `vlmocr run` with Tesseract; and the renderer's rules held for each: sizes
refused from headers before anything is decoded, JPEG 2000 decoded at a reduced size, an
animation read as its first frame, DjVu without its tools a clear bad_input naming the package."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from support.cli import run_cli
from support.components import need
from support.documents import text_image
from support.memory import peak_rss_mb
from support.records import read_records
from vlmocr.exceptions import BadInput
from vlmocr.inputs.render import Sizing, count_pages, render_page
from vlmocr.inputs.sources import derive_doc_id

# One word per file that Tesseract reads reliably, so each record is shown to hold its own page.
WORDS = {"scan.jp2": "Harbour", "codestream.j2k": "Orchard", "master.jpf": "Lantern", "extended.jpx": "Chapel",
         "plate.bmp": "Railway", "leaflet.gif": "Village", "grey.pgm": "Printer", "bitonal.pbm": "Council",
         "colour.ppm": "Teacher", "any.pnm": "Harvest"}


def _lines(word: str) -> list[str]:
    return [f"{word} {word} {word}", "The quick brown fox", "jumps over the lazy dog"]


def need_djvulibre() -> None:
    need(all(shutil.which(t) for t in ("c44", "djvm", "djvused", "ddjvu")), "DjVuLibre's tools", "djvulibre-bin")


def make_djvu(path: Path, pages: list[Image.Image], dpi: int = 150) -> Path:
    """A real multi-page DjVu: each page encoded by c44 (IW44), bundled by djvm."""
    parts = []
    for i, img in enumerate(pages, 1):
        pgm = path.with_name(f"{path.stem}-{i}.pgm")
        img.convert("L").save(pgm)
        part = pgm.with_suffix(".part.djvu")
        subprocess.run(["c44", "-dpi", str(dpi), str(pgm), str(part)], check=True, capture_output=True)
        parts.append(str(part))
        pgm.unlink()
    subprocess.run(["djvm", "-c", str(path), *parts], check=True, capture_output=True)
    for part in parts:
        os.unlink(part)
    return path


def make_formats(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, word in WORDS.items():
        img = text_image(_lines(word))
        if name.endswith(".gif"):  # an animation: its second frame is no page and must not be read
            img.save(folder / name, save_all=True, append_images=[text_image(["Bridge Bridge Bridge"])],
                     duration=500, loop=0)
        elif name.endswith((".jp2", ".jpf", ".jpx", ".ppm")):
            img.convert("RGB").save(folder / name, format="JPEG2000" if not name.endswith(".ppm") else "PPM")
        elif name.endswith(".j2k"):
            img.save(folder / name)  # a bare codestream
        elif name.endswith((".pbm", ".pnm")):
            img.convert("1").save(folder / name, format="PPM")
        else:
            img.save(folder / name)


@pytest.mark.tesseract
def test_every_delivered_format_is_read_by_vlmocr_run(tmp_path):
    need(shutil.which("tesseract") is not None, "tesseract binary", "tesseract-ocr")
    need_djvulibre()
    corpus = tmp_path / "corpus"
    make_formats(corpus)
    make_djvu(corpus / "volume.djvu", [text_image(_lines("Market")), text_image(_lines("Garden"))])
    assert Image.open(corpus / "master.jpf").format == Image.open(corpus / "codestream.j2k").format == "JPEG2000"
    run = tmp_path / "run"
    res = run_cli("run", str(corpus), "--out", str(run), "--engine", "tesseract", "--lang", "eng", "--workers", "2",
                  env={"OMP_THREAD_LIMIT": "1"})
    assert res.returncode == 0, res.stderr + res.stdout
    assert "Done: 12 pages in 11 docs" in res.stdout
    got = {(r["doc_id"], r["page"]): r for r in read_records(run)}
    expect = {(derive_doc_id(name), 1): word for name, word in WORDS.items()}
    expect.update({("volume", 1): "Market", ("volume", 2): "Garden"})
    assert sorted(got) == sorted(expect)
    for key, word in expect.items():
        rec = got[key]
        assert rec["status"] == "ok" and word in rec["text"] and "quick brown fox" in rec["text"], rec
    assert got["leaflet", 1]["flags"] == ["animated"] and "Bridge" not in got["leaflet", 1]["text"]
    assert got["volume", 2]["dpi"] == 150.0 and (got["volume", 2]["width"], got["volume", 2]["height"]) == (900, 1200)


def test_a_gif_is_one_page_whatever_its_frames(tmp_path):
    gif = tmp_path / "many.gif"
    frames = [Image.new("L", (60, 40), 40 * i) for i in range(6)]
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    assert Image.open(gif).n_frames == 6
    assert count_pages(gif) == 1
    r = render_page(gif, 1, Sizing())
    assert r.flags == ["animated"] and r.image.convert("L").getextrema() == (0, 0) and r.same_as_file is None
    with pytest.raises(BadInput, match=r"page 2 does not exist \(the image has 1 frames\)"):
        render_page(gif, 2, Sizing())
    Image.new("L", (60, 40), 255).save(tmp_path / "still.gif")
    assert render_page(tmp_path / "still.gif", 1, Sizing()).flags == []


def _patch_jp2(src: Path, dst: Path, size: tuple[int, int], *, box: bool = True, codestream: bool = True) -> Path:
    """A copy of a small JP2 whose `ihdr` box and/or codestream SIZ segment claim `size`."""
    data = bytearray(src.read_bytes())
    w, h = size
    if box:
        i = data.index(b"ihdr")
        data[i + 4:i + 12] = h.to_bytes(4, "big") + w.to_bytes(4, "big")
    if codestream:
        j = data.index(b"\xff\x4f\xff\x51")
        data[j + 8:j + 16] = w.to_bytes(4, "big") + h.to_bytes(4, "big")
    dst.write_bytes(data)
    return dst


def test_sizes_are_refused_from_the_headers_of_every_new_format(tmp_path):
    small = tmp_path / "small.jp2"
    Image.new("L", (90, 120), 255).save(small)
    cases = {
        _patch_jp2(small, tmp_path / "box-and-codestream.jp2", (21000, 20000)):
            "frame 1 of 21000x20000 px exceeds the 400 MP limit",
        _patch_jp2(small, tmp_path / "over-pillows-limit.jp2", (30000, 30000)): "image larger than 800 MP",
        # the box says small, the codestream (what OpenJPEG decodes) huge: the codestream is checked
        _patch_jp2(small, tmp_path / "codestream-only.jp2", (60000, 60000), box=False):
            "frame 1 of 60000x60000 px exceeds the 400 MP limit",
        _patch_jp2(small, tmp_path / "box-only.jp2", (100, 100), codestream=False):
            "its header says 100x100 px, its codestream 90x120",
    }
    bmp = tmp_path / "huge.bmp"
    Image.new("L", (90, 120), 255).save(bmp)
    data = bytearray(bmp.read_bytes())
    data[18:26] = (30000).to_bytes(4, "little") + (20000).to_bytes(4, "little")  # BITMAPINFOHEADER width, height
    bmp.write_bytes(data)
    cases[bmp] = "frame 1 of 30000x20000 px exceeds the 400 MP limit"
    pgm = tmp_path / "huge.pgm"
    pgm.write_bytes(b"P5\n25000 20000\n255\n" + b"\xff" * 1000)  # 500 MP declared, 1 kB on disk
    cases[pgm] = "frame 1 of 25000x20000 px exceeds the 400 MP limit"
    gif = tmp_path / "sliver.gif"
    Image.new("L", (2, 400), 255).save(gif)
    cases[gif] = r"frame 1 \(2x400 px\) is 200 times as long as wide"
    for path, reason in cases.items():
        with pytest.raises(BadInput, match=reason):
            render_page(path, 1, Sizing())


def test_a_djvu_page_declaring_a_huge_size_is_refused_before_drawing(tmp_path):
    need_djvulibre()
    doc = make_djvu(tmp_path / "two.djvu", [text_image(["one"], (300, 400)), text_image(["two"], (300, 400))])
    data = bytearray(doc.read_bytes())
    i = data.index(b"INFO", data.index(b"INFO") + 4)  # the second page's INFO chunk: width, height
    data[i + 8:i + 12] = (60000).to_bytes(2, "big") + (60000).to_bytes(2, "big")
    doc.write_bytes(data)
    assert count_pages(doc) == 2
    assert render_page(doc, 1, Sizing()).image.size == (300, 400)
    with pytest.raises(BadInput, match="frame 2 of 60000x60000 px exceeds the 400 MP limit: two.djvu"):
        render_page(doc, 2, Sizing())
    with pytest.raises(BadInput, match=r"page 3 does not exist \(the DjVu file has 2 pages\)"):
        render_page(doc, 3, Sizing())
    # drawn at the size the rules allow, never larger: the pixel cap, the longest side
    r = render_page(doc, 1, Sizing(max_pixels=30_000))
    assert r.image.width * r.image.height <= 30_000 and r.flags == ["downscaled"] and r.dpi == pytest.approx(75, abs=1)
    assert max(render_page(doc, 1, Sizing(longest_side=200)).image.size) == 200
    (tmp_path / "junk.djvu").write_bytes(b"AT&TFORM\x00\x00\x00\x04DJVU")
    with pytest.raises(BadInput, match="corrupt or not a DjVu file .*junk.djvu"):
        count_pages(tmp_path / "junk.djvu")


def test_djvu_without_its_tools_is_a_bad_input_naming_the_package(tmp_path):
    need_djvulibre()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_djvu(corpus / "book.djvu", [text_image(["page"], (300, 400))])
    Image.new("L", (300, 400), 255).save(corpus / "blank.png")
    bare = tmp_path / "bin"
    bare.mkdir()  # a PATH without djvused and ddjvu (vlmocr itself runs as `python -m vlmocr`)
    run = tmp_path / "run"
    res = run_cli("run", str(corpus), "--out", str(run), "--engine", "textlayer", "--workers", "1",
                  env={"PATH": str(bare)})
    assert res.returncode == 2, res.stderr  # the blank page is to review (2 outranks 9: the DjVu is unreadable)
    got = {(r["doc_id"], r["page"]): r for r in read_records(run)}
    assert got["book", 0]["status"] == "bad_input"
    assert got["book", 0]["error"] == ("reading DjVu needs DjVuLibre's djvused and ddjvu "
                                       "(Debian/Ubuntu: apt-get install djvulibre-bin): book.djvu")
    assert got["blank", 1]["status"] != "bad_input"  # the other documents are read as ever


def test_a_big_jpeg_2000_is_decoded_at_a_reduced_size(tmp_path):
    path = tmp_path / "master.jp2"
    Image.new("L", (8000, 8000), 250).save(path)  # 64 MP: OpenJPEG takes ~370 MB to decode it whole
    probe = f"""
    from pathlib import Path
    from vlmocr.inputs.render import Sizing, render_page
    def mb():
        return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
    print("base", mb())
    r = render_page(Path({str(path)!r}), 1, Sizing(max_pixels=4_000_000))
    assert r.image.size == (2000, 2000) and r.flags == ["downscaled"], (r.image.size, r.flags)
    print("peak", mb())
    """
    mem = peak_rss_mb(probe)
    assert mem["peak"] - mem["base"] < 80, mem  # decoded at 1/4 of each side: 4 MP


def test_triage_tells_the_pages_of_every_new_format(tmp_path):
    need_djvulibre()
    corpus = tmp_path / "corpus"
    make_formats(corpus)
    make_djvu(corpus / "volume.djvu", [text_image(["one"]), text_image(["two"]), text_image(["three"])], dpi=300)
    out = tmp_path / "triage.csv"
    res = run_cli("triage", str(corpus), "--out", str(out))
    assert res.returncode == 0, res.stderr
    rows = {r["doc_id"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert set(rows) == {derive_doc_id(n) for n in WORDS} | {"volume"}
    for row in rows.values():
        assert (row["kind"], row["status"], row["image_px_max"]) == ("image", "ok", "900x1200"), row
    assert rows["leaflet"]["pages"] == "1"  # an animation is one page
    assert (rows["volume"]["pages"], rows["volume"]["scan_dpi"], rows["volume"]["dpi_source"]) == ("3", "300", "metadata")

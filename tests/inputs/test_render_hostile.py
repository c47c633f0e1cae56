"""Hostile files that are tiny on disk: a TIFF whose second frame claims 28000² or 60000² px, a
TIFF of thousands of frames, a PDF page 0.001 pt wide, a PDF claiming a million pages, huge
images under the pixel cap. Each must end as a clear `bad_input` (final) or be read within
bounded memory and time."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from PIL import Image, TiffImagePlugin

from support.cli import run_cli
from support.memory import peak_rss_mb
from support.records import read_records
from vlmocr.exceptions import BadInput
from vlmocr.inputs import render
from vlmocr.inputs.render import Sizing, count_pages, render_page
from vlmocr.testing.hostile_files import write_pdf, write_png, write_tiff

SRC = Path(render.__file__).resolve().parents[2]  # the code under test, for child processes too


def test_every_tiff_frame_is_held_to_the_pixel_cap(tmp_path):
    tif = write_tiff(tmp_path / "second.tif", [(400, 300), (28000, 28000), (60000, 60000), (300, 400)])
    assert tif.stat().st_size < 200_000  # 784 MP and 3.6 GP of pixels, in a few strips on disk
    assert count_pages(tif) == 4
    assert render_page(tif, 1, Sizing()).image.size == (400, 300)
    for page, side in ((2, 28000), (3, 60000)):
        with pytest.raises(BadInput, match=f"frame {page} of {side}x{side} px exceeds the 400 MP limit: second.tif"):
            render_page(tif, page, Sizing())
    assert render_page(tif, 4, Sizing()).image.size == (300, 400)  # the file is still readable


def test_a_sliver_page_is_bad_input_not_an_engine_error(tmp_path):
    sliver = write_pdf(tmp_path / "sliver.pdf", [(0.001, 14400), (595, 842)])
    with pytest.raises(BadInput, match=r"page 1 \(0.001 x 14400 pt\) is .* too thin to read"):
        render_page(sliver, 1, Sizing())
    assert render_page(sliver, 2, Sizing(dpi=72)).image.size == (595, 842)
    strip = write_png(tmp_path / "strip.png", 1, 40000)
    with pytest.raises(BadInput, match=r"frame 1 \(1x40000 px\) .* too thin"):
        render_page(strip, 1, Sizing())


def test_a_pdf_claiming_a_million_pages_is_refused_by_the_cap(tmp_path, monkeypatch):
    liar = write_pdf(tmp_path / "million.pdf", [(595, 842)] * 2, claimed_pages=1_000_000)
    with pytest.raises(BadInput, match=r"too many pages: the PDF claims 1,000,000 pages, over the cap of "
                                       r"50,000 per document \(VLMOCR_MAX_DOC_PAGES raises it\): million.pdf"):
        count_pages(liar)
    monkeypatch.setenv("VLMOCR_MAX_DOC_PAGES", "2000000")
    assert count_pages(liar) == 1_000_000
    monkeypatch.setenv("VLMOCR_MAX_DOC_PAGES", "1")
    with pytest.raises(BadInput, match="over the cap of 1 per document"):
        count_pages(write_tiff(tmp_path / "two.tif", [(50, 50), (50, 50)]))


def test_hostile_files_end_as_final_bad_input_records(tmp_path):
    """The whole way: `vlmocr run` with an OCR engine writes one bad_input record naming the
    problem for each hostile page, reads the good pages, and a resubmit reads nothing again."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_tiff(corpus / "frames.tif", [(400, 300), (28000, 28000), (60000, 60000)], value=255)
    write_pdf(corpus / "sliver.pdf", [(0.001, 14400)])
    write_pdf(corpus / "million.pdf", [(595, 842)], claimed_pages=1_000_000)
    run = tmp_path / "run"
    args = ["run", str(corpus), "--out", str(run), "--engine", "rapidocr", "--workers", "1"]
    res = run_cli(*args, env={"VLMOCR_MAX_DOC_PAGES": "1000"})
    assert res.returncode == 9, res.stderr
    got = {(r["doc_id"], r["page"]): r for r in read_records(run)}
    assert sorted(got) == [("frames", 1), ("frames", 2), ("frames", 3), ("million", 0), ("sliver", 1)]
    assert got["frames", 1]["status"] == "ok"  # white paper, read as such
    expect = {("frames", 2): "frame 2 of 28000x28000 px exceeds", ("frames", 3): "frame 3 of 60000x60000 px exceeds",
              ("million", 0): "claims 1,000,000 pages, over the cap of 1,000", ("sliver", 1): "too thin to read"}
    for key, reason in expect.items():
        assert got[key]["status"] == "bad_input" and reason in got[key]["error"], got[key]
    again = run_cli(*args, env={"VLMOCR_MAX_DOC_PAGES": "1000"})
    assert again.returncode == 9 and len(read_records(run)) == 5  # bad_input is final: nothing re-read


def test_a_tiff_of_hundreds_of_frames_is_read_in_linear_time(tmp_path, monkeypatch):
    """Reading page k of a fresh open walks k frame headers: every page read that way makes the
    whole file quadratic. Count the frame headers Pillow actually parses."""
    tif = write_tiff(tmp_path / "many.tif", [(32, 32)] * 800)
    parsed = [0]
    original = TiffImagePlugin.ImageFileDirectory_v2.load

    def counting(self, fp):  # the real parser, counted
        parsed[0] += 1
        return original(self, fp)

    monkeypatch.setattr(TiffImagePlugin.ImageFileDirectory_v2, "load", counting)
    assert count_pages(tif) == 800
    walk = parsed[0]
    assert walk >= 800
    parsed[0] = 0
    for page in range(781, 801):
        assert render_page(tif, page, Sizing()).image.size == (32, 32)
    assert parsed[0] <= 20 * 3, parsed[0]  # a few headers a page, not ~800

    # frames refused from their headers keep the file open too
    liar = write_tiff(tmp_path / "oversized.tif", [(32, 32)] + [(28000, 28000)] * 399)
    assert count_pages(liar) == 400
    parsed[0] = 0
    for page in range(381, 401):
        with pytest.raises(BadInput, match="exceeds the 400 MP limit"):
            render_page(liar, page, Sizing())
    assert parsed[0] <= 20 * 3, parsed[0]


# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak (Linux keeps it over
# fork and exec), so after a few tests in this process it would hide the child's own peak.
PROBE = """
    from pathlib import Path
    from vlmocr.inputs.render import Sizing, render_page
    def mb():
        status = open("/proc/self/status").read()
        return int(status.split("VmHWM:")[1].split()[0]) / 1024
    print("base", mb())
    r = render_page(Path({path!r}), 1, Sizing())
    assert r.image.size == {size!r} and r.flags == ["downscaled"], (r.image.size, r.flags)
    print("peak", mb())
"""


def test_a_big_jpeg_is_decoded_at_a_reduced_size(tmp_path):
    path = tmp_path / "big.jpg"
    Image.new("L", (10000, 10000), 250).save(path, quality=80)  # 100 MB decoded, 0.4 MB on disk
    mem = peak_rss_mb(PROBE.format(path=str(path), size=(5000, 5000)))
    # draft() decodes at 5000² (25 MB); a full decode alone would be 100 MB
    assert mem["peak"] - mem["base"] < 60, mem


def test_a_big_png_is_downscaled_without_full_size_copies(tmp_path):
    path = write_png(tmp_path / "big.png", 12000, 12000)  # 144 MB decoded
    mem = peak_rss_mb(PROBE.format(path=str(path), size=(5000, 5000)))
    # the decoded frame, the narrow first resampling pass and the result; no second full copy
    assert mem["peak"] - mem["base"] < 2 * 144, mem


def test_large_decodes_wait_for_each_other_across_processes(tmp_path):
    """One large decode at a time among the user's processes: while another process (here the
    test) holds the slot, a worker's large frame waits; a small one does not."""
    big = write_png(tmp_path / "big.png", 3000, 3000)
    small = write_png(tmp_path / "small.png", 300, 300)
    lock = os.path.join(tempfile.gettempdir(), f"vlmocr-{os.getuid()}-large-decode.lock")
    script = textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from vlmocr.inputs import render
        render.LARGE_DECODE_BYTES = 1 << 20  # 3000² px counts as large here, 300² does not
        t = time.monotonic()
        render.render_page(Path(sys.argv[1]), 1, render.Sizing())
        print(round(time.monotonic() - t, 2), time.time())
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        waiting = subprocess.Popen([sys.executable, "-c", script, str(big)], stdout=subprocess.PIPE, text=True, env=env)
        quick = subprocess.run([sys.executable, "-c", script, str(small)], capture_output=True, text=True, env=env,
                               timeout=60)
        assert quick.returncode == 0 and float(quick.stdout.split()[0]) < 2, quick.stderr
        time.sleep(1.0)
        assert waiting.poll() is None  # still waiting for the slot
        released = time.time()
    finally:
        os.close(fd)  # releases the slot
    out, _ = waiting.communicate(timeout=60)
    # The large decode finished only after the slot was given up (not "took a second": on a loaded
    # machine the waiting process may still be importing for much of the time the slot is held).
    assert waiting.returncode == 0 and float(out.split()[1]) >= released

"""Issue 33, point 1 (the profile's own answer): olmOCR's model says when a page is not upright
(`is_rotation_valid: false`, `rotation_correction: N`) and olmOCR's pipeline turns the page and
asks again; vlmocr parsed the field into the record and dropped it, keeping the sideways reading.
Now the page is turned (PIL's Transpose.ROTATE_N, olmOCR's convention) and asked once more, and
the record says what was done. A real HTTP server that answers as olmOCR would for what it sees."""

from __future__ import annotations

from PIL import Image

from support.cli import run_cli
from support.records import read_records
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import expected_text, make_coded_png, read_code

NO_KEY = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}


def test_a_sideways_page_is_turned_and_asked_again(tmp_path):
    upright = make_coded_png(tmp_path / "upright.png", 7)
    sideways = tmp_path / "sideways.png"
    with Image.open(upright) as im:
        assert read_code(im) == 7
        turned = im.transpose(Image.Transpose.ROTATE_90)  # scanned a quarter turn off
        assert read_code(turned) is None  # the server cannot read it as sent
        turned.save(sideways)
        size = im.size
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="olmocr")) as srv:
        # --rotate-pages off: the model's own answer turns the page here (under auto the first
        # page of each document is looked at, and turned, before it is sent: test_vlm_orientation).
        res = run_cli("run", str(sideways), str(upright), "--out", str(run), "--endpoint", srv.url,
                      "--profile", "olmocr-2", "--workers", "1", "--rotate-pages", "off", env=NO_KEY)
        asked = srv.requests()
    assert res.returncode == 0, res.stderr
    recs = {r["doc_id"]: r for r in read_records(run)}
    assert len(recs) == 2 and len(asked) == 3  # the sideways page twice, the upright one once
    fixed, plain = recs["sideways"], recs["upright"]
    assert fixed["text"].strip() == expected_text(7) and fixed["status"] == "ok"
    assert (fixed["rotation"], fixed["rotation_from"]) == (270, "model")
    assert "asked_again_rotated:270" in fixed["flags"] and fixed["fields"]["rotation_valid"] is True
    # The page as it was read: upright (portrait, as the page is), not as the file lies (landscape).
    assert fixed["width"] < fixed["height"] and size[0] < size[1]
    assert "rotation" not in plain and plain["text"].strip() == expected_text(7)

"""Issue 30, point 0: the failure users report most against VLM OCR ended `ok`. A blank page read
through an endpoint that answers a fluent passage whatever it is shown was `ok` (score 1.0) with
the flag `text_on_blank_image` set and ignored. The image says there is nothing to read: the answer
is `suspect`, climbs the retry ladder, and the page ends as the fallback engine reads it (blank),
never with the invented passage as an `ok` reading. A real HTTP server and a real blank scan."""

from __future__ import annotations

import json

from PIL import Image

from support.cli import run_cli
from support.records import read_records
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

ART_OF_WAR = ("Sun Tzu said: The art of war is of vital importance to the State. It is a matter of life and "
              "death, a road either to safety or to ruin. Hence it is a subject of inquiry which can on no "
              "account be neglected.")


def test_a_fluent_answer_on_a_blank_page_is_never_ok(tmp_path):
    blank = tmp_path / "blank.png"
    Image.new("L", (1000, 1400), 255).save(blank)
    run = tmp_path / "run"
    with serve_in_process(ServerConfig(answer="static", static_text=ART_OF_WAR)) as srv:
        res = run_cli("run", str(blank), "--out", str(run), "--endpoint", srv.url, "--workers", "1",
                      "--request-timeout", "10", env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
        asked = len(srv.requests())
    recs = read_records(run)
    vlm = [r for r in recs if r["engine"] == "openai"]
    assert vlm and asked == len(vlm) > 1  # the first answer and its ladder
    assert all(r["status"] == "suspect" and "text_on_blank_image" in r["flags"] for r in vlm), vlm
    final = recs[-1]
    # The fallback reads the page as it is: blank, nothing invented.
    assert "fallback" in final["flags"] and final["text"] == "" and "blank_page" in final["flags"], final
    assert not any(r["status"] == "ok" and "Sun Tzu" in r["text"] for r in recs)
    assert res.returncode == 0, res.stderr  # a blank page read as blank is a success
    summary = json.loads((run / "run.json").read_text())["summary"]
    assert summary["statuses"] == {"fallback": 1}

"""Plugins (engines/plugins.py, VLMOCR_PLUGINS): a module named there wraps each CPU engine a worker
builds; one that cannot be imported stops the command at its start, naming it. The test suite's
reading cache (tests/plugins/reading_cache.py) is such a plugin: a page read once is answered from
it, with the engine's own reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.records import read_records

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CACHE_PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "reading_cache.py"

LOG_MAKING = ("import os\n"
              "def wrap_engine(name, options, build):\n"
              "    with open(os.environ['VLMOCR_MADE_LOG'], 'a') as fh:\n"
              "        fh.write(name + '\\n')\n"
              "    return build()\n")


@pytest.fixture
def made(tmp_path, monkeypatch) -> Path:
    """The log the plugin LOG_MAKING writes each making to, loaded before the suite's reading cache
    (with a cache of its own, in tmp_path): a making logged is a reading the cache did not have."""
    log = tmp_path / "made.log"
    (tmp_path / "log_making.py").write_text(LOG_MAKING, encoding="utf-8")
    monkeypatch.setenv("VLMOCR_PLUGINS", f"{tmp_path / 'log_making.py'},{CACHE_PLUGIN}")
    monkeypatch.setenv("VLMOCR_MADE_LOG", str(log))
    monkeypatch.setenv("VLMOCR_TEST_READING_CACHE", str(tmp_path / "cache"))
    return log


def test_a_plugin_that_cannot_be_imported_is_a_usage_error_naming_it(tmp_path):
    for name in ("no_such_plugin_here", str(tmp_path / "no_such_plugin.py")):
        res = run_cli("run", str(SAMPLES / "born-digital.pdf"), "--out", str(tmp_path / "r"),
                      env={"VLMOCR_PLUGINS": name})
        assert res.returncode == 3, res.stderr
        assert "VLMOCR_PLUGINS" in res.stderr and name in res.stderr
        assert not (tmp_path / "r" / "pages.jsonl").exists()


def test_a_plugin_wraps_every_engine_a_worker_builds(tmp_path):
    (tmp_path / "plugs").mkdir()
    log = tmp_path / "wrapped.log"
    (tmp_path / "plugs" / "count_reads.py").write_text(
        "import os\n"
        "class Counting:\n"
        "    def __init__(self, name, engine):\n"
        "        self.name, self.engine = name, engine\n"
        "    def __getattr__(self, a):\n"
        "        return getattr(self.engine, a)\n"
        "    def read(self, page, **kw):\n"
        "        with open(os.environ['VLMOCR_COUNT_LOG'], 'a') as fh:\n"
        "            fh.write(f'{self.name} {page.doc_id} {page.page}\\n')\n"
        "        return self.engine.read(page, **kw)\n"
        "def wrap_engine(name, options, build):\n"
        "    return Counting(name, build())\n", encoding="utf-8")
    env = {"VLMOCR_PLUGINS": str(tmp_path / "plugs" / "count_reads.py"), "VLMOCR_COUNT_LOG": str(log)}
    res = run_cli("run", str(SAMPLES / "born-digital.pdf"), "--out", str(tmp_path / "r"), "--engine", "textlayer",
                  "--workers", "1", env=env)
    assert res.returncode == 0, res.stderr
    pages = len(read_records(tmp_path / "r"))
    assert sorted(log.read_text().splitlines()) == sorted(f"textlayer born-digital {p}" for p in range(1, pages + 1))


def test_the_reading_cache_answers_a_page_read_before_with_the_engines_own_reading(tmp_path, tesseract):
    cache = tmp_path / "cache"
    env = {"VLMOCR_TEST_READING_CACHE": str(cache)}
    page = SAMPLES / "typescript-fr.png"
    first = run_cli("run", str(page), "--out", str(tmp_path / "a"), "--engine", "tesseract", "--lang", "fra",
                    "--workers", "1", env={"VLMOCR_TEST_READING_CACHE": "0"})
    assert first.returncode == 0, first.stderr
    for run in ("b", "c"):
        res = run_cli("run", str(page), "--out", str(tmp_path / run), "--engine", "tesseract", "--lang", "fra",
                      "--workers", "1", env=env)
        assert res.returncode == 0, res.stderr
    assert len(list(cache.rglob("*.pickle"))) == 1  # read once, by the first run that had the cache
    texts = {run: read_records(tmp_path / run)[0]["text"] for run in ("a", "b", "c")}
    assert texts["a"] and texts["a"] == texts["b"] == texts["c"]
    quality = [json.dumps(read_records(tmp_path / run)[0]["quality"], sort_keys=True) for run in ("a", "c")]
    assert quality[0] == quality[1]
    # Another language is another reading.
    res = run_cli("run", str(page), "--out", str(tmp_path / "d"), "--engine", "tesseract", "--lang", "eng",
                  "--workers", "1", env=env)
    assert res.returncode in (0, 2), res.stderr  # French read as English may be suspect
    assert len(list(cache.rglob("*.pickle"))) >= 2  # (a suspect page is read again with local thresholds too)


def test_a_page_answered_from_the_cache_never_makes_the_engine(tmp_path, tesseract):
    """The engine is made (its models loaded: seconds for RapidOCR) only when a page needs it: a
    plugin before the cache logs each making, and a second run of the same page makes none."""
    made = tmp_path / "made.log"
    (tmp_path / "log_making.py").write_text(LOG_MAKING, encoding="utf-8")
    env = {"VLMOCR_PLUGINS": f"{tmp_path / 'log_making.py'},{CACHE_PLUGIN}", "VLMOCR_MADE_LOG": str(made),
           "VLMOCR_TEST_READING_CACHE": str(tmp_path / "cache")}
    page = SAMPLES / "typescript-fr.png"
    for run in ("a", "b"):
        res = run_cli("run", str(page), "--out", str(tmp_path / run), "--engine", "tesseract", "--lang", "fra",
                      "--workers", "1", env=env)
        assert res.returncode == 0, res.stderr
        if run == "a":
            assert made.read_text().splitlines() == ["tesseract"]  # read: made once
            made.unlink()
    assert not made.exists()  # answered from the cache: never made
    assert read_records(tmp_path / "a")[0]["text"] == read_records(tmp_path / "b")[0]["text"]


def test_osd_is_asked_through_the_plugins_so_the_cache_answers_a_page_seen_before(tmp_path, made, monkeypatch,
                                                                                   tesseract):
    """Tesseract's OSD (a tesseract process, ~1 s a page) is a reader of a page image too: asked
    through the plugins as `tesseract-osd`, so the suite's cache answers it the second time with
    OSD's own answer, and OSD is run only once."""
    from PIL import Image

    from vlmocr.engines.osd import OSD_ENGINE, osd_image

    page = Image.open(SAMPLES / "typescript-fr.png")
    first, again = osd_image(page), osd_image(page)
    assert first.script == "Latn" and first.counts, first  # OSD's real answer: a French typescript
    assert again == first
    assert made.read_text().splitlines() == [OSD_ENGINE]  # run once; the second answered from the cache
    assert len(list((tmp_path / "cache").rglob("*.pickle"))) == 1
    monkeypatch.setenv("VLMOCR_TEST_READING_CACHE", "0")  # the cache off: OSD runs again
    assert osd_image(page).script == first.script and made.read_text().splitlines() == [OSD_ENGINE] * 2


def test_the_stand_ins_ocr_answer_is_asked_through_the_plugins(made):
    """The stand-in server's `ocr` answer (RapidOCR on the image sent, seconds a page) is made
    through the plugins as `stand-in:rapidocr`: the suite's cache answers an image it has read."""
    import base64

    import httpx2 as httpx

    from vlmocr.testing.fake_vllm import STAND_IN_OCR
    from vlmocr.testing.openai_server import ServerConfig, serve_in_process

    url = "data:image/png;base64," + base64.b64encode((SAMPLES / "typescript-fr.png").read_bytes()).decode()
    body = {"model": "test-model", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Read this page."}]}]}
    answers = []
    for _ in range(2):  # two servers: the second one's engine is never made
        with serve_in_process(ServerConfig(answer="ocr")) as srv:
            res = httpx.post(f"{srv.url}/chat/completions", json=body, timeout=120)
            assert res.status_code == 200, res.text
            answers.append(res.json()["choices"][0]["message"]["content"])
    assert answers[0] == answers[1] and "pommes de pin" in answers[0]  # RapidOCR's real reading, twice
    assert made.read_text().splitlines() == [STAND_IN_OCR]

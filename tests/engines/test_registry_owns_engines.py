"""Issue 28, point 3: an engine is declared once. Its share of the settings key, whether it reads
with language data, and the names the help offers come from engines/registry.py; the settings,
the pool worker and the run command name no engine (they had tested `name == "tesseract"` and built
the key share of Tesseract and RapidOCR by hand)."""

from __future__ import annotations

import re

from support.components import REPO
from vlmocr.engines.registry import CPU_ENGINES, ENGINE_CHOICES, OCR_ENGINES, engine_key_material, reads_language
from vlmocr.reading.plan import RunPlan
from vlmocr.settings.config import RunConfig

SRC = REPO / "src" / "vlmocr"
NAMED = re.compile(r"[\"'](tesseract|rapidocr)[\"']")


def test_settings_worker_and_run_command_name_no_engine():
    for rel in ("settings/config.py", "reading/plan.py", "reading/worker.py", "cli/run_cmd.py"):
        assert not NAMED.findall((SRC / rel).read_text(encoding="utf-8")), rel


def test_the_key_share_is_the_registrys():
    assert reads_language("tesseract") and reads_language("tesseract+rapidocr") and not reads_language("rapidocr")
    assert engine_key_material("tesseract", "deu") == {"lang": "deu"}
    assert set(engine_key_material("rapidocr", "deu")) == {"rapidocr"}
    assert engine_key_material("tesseract+rapidocr", "deu") == {**engine_key_material("tesseract", "deu"),
                                                                **engine_key_material("rapidocr", "deu")}
    assert engine_key_material("textlayer", "deu") == {}
    for name in CPU_ENGINES:
        material = RunPlan(RunConfig(inputs=["x"], out="/tmp/o", engine=name, lang="deu")).key_material()
        assert {k: material[k] for k in engine_key_material(name, "deu")} == engine_key_material(name, "deu")


def test_the_help_offers_the_registrys_names():
    from support.cli import run_cli

    text = " ".join(run_cli("run", "--help", env={"COLUMNS": "300"}).stdout.split())
    assert "|".join(ENGINE_CHOICES) in text
    for name in OCR_ENGINES:
        assert name in text.split("--ocr-engine", 1)[1].split("--endpoint", 1)[0]

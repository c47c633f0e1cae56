"""Engine names → constructors. CPU engines are built once per worker process."""

from __future__ import annotations

from typing import Any

CPU_ENGINES = ("textlayer", "rapidocr", "tesseract")
ENGINE_CHOICES = ("auto",) + CPU_ENGINES + ("openai",)


def make_cpu_engine(name: str, options: dict[str, Any]) -> Any:
    if name == "textlayer":
        from .textlayer import TextLayerEngine

        return TextLayerEngine()
    if name == "rapidocr":
        from .rapidocr import RapidOcrEngine

        return RapidOcrEngine(threads=int(options.get("threads", 1)))
    if name == "tesseract":
        from .tesseract import TesseractEngine

        return TesseractEngine(lang=options.get("lang") or "eng", version=options.get("tesseract_version"))
    raise ValueError(f"unknown CPU engine {name!r}")

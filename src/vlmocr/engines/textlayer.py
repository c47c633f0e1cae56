"""The text layer of born-digital PDF pages: exact, instant, and free."""

from __future__ import annotations

from .base import CpuEngine, EngineOptions, PageInput, Reading


class TextLayerEngine:
    name = "textlayer"

    def read(self, page: PageInput) -> Reading:
        text = (page.text_layer or "").strip("\n")
        return Reading(text=text, finish_reason="stop")


def _build(options: EngineOptions) -> TextLayerEngine:
    return TextLayerEngine()


# The text layer reads no image: `--ocr-engine` cannot name it, `auto` never picks it for a scan.
ENGINE = CpuEngine("textlayer", _build, ocr=False)

"""The text layer of born-digital PDF pages: exact, instant, and free."""

from __future__ import annotations

from .base import PageInput, Reading


class TextLayerEngine:
    name = "textlayer"

    def read(self, page: PageInput) -> Reading:
        text = (page.text_layer or "").strip("\n")
        return Reading(text=text, finish_reason="stop")

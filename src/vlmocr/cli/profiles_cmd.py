"""`vlmocr profiles list | show P` (filled in with the profiles module)."""

from __future__ import annotations

from . import app

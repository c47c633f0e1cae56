"""The test suite's cache of real engines' readings, a vlmocr plugin (engines/plugins.py): a page
image a CPU engine has read before — the same pixels, engine, options, engine versions and the same
vlmocr code of engines/, positions/ and text/ — is answered from the cache instead of read again.
As OCRmyPDF's tests cache Tesseract's output: the reading is the engine's own, made once, and
every test after the first that reads that page gets it in milliseconds.

tests/conftest.py loads it (VLMOCR_PLUGINS=the path of this file) with
VLMOCR_TEST_READING_CACHE=DIR (~/.cache/vlmocr/test-readings unless set; `0`: off). A test that needs
a reading to take its time — a stop or a kill while pages are in the workers' hands, an engine's
speed — asks for the `real_readings` fixture, which turns it off for the processes it starts."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

CACHE = "VLMOCR_TEST_READING_CACHE"
# Bump when what a reading holds changes in a way the code hash below cannot see.
REVISION = 1


@lru_cache(maxsize=1)
def _code_hash() -> str:
    """The vlmocr code a reading depends on beyond the engine library: a change to it reads again."""
    import vlmocr

    root = Path(vlmocr.__file__).resolve().parent
    h = hashlib.sha256()
    for folder in ("engines", "positions", "text"):
        for path in sorted((root / folder).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    h.update((root / "runfolder" / "record.py").read_bytes())
    return h.hexdigest()


class CachedEngine:
    """The engine `build()` makes, with `read` answered from the cache when the page was read
    before — and the engine made only when a page is not (its models take seconds to load)."""

    def __init__(self, name: str, options: Any, build: Any, root: Path) -> None:
        self._name, self._build, self._root = name, build, root
        versions = {}
        try:
            from vlmocr.engines.registry import CPU_ENGINES

            versions = CPU_ENGINES[name].versions()
        except Exception:  # noqa: BLE001 - no versions: the code hash and options still key it
            pass
        self._base = repr((REVISION, name, sorted((k, repr(v)) for k, v in dict(options).items()
                                                  if k not in ("scheduler_pid",)),
                           sorted(versions.items()), _code_hash()))

    @property
    def _engine(self) -> Any:
        return self._build()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._engine, attr)

    def _key(self, page: Any, kwargs: dict[str, Any]) -> str | None:
        image = getattr(page, "image", None)
        if image is None:
            return None
        h = hashlib.sha256(self._base.encode())
        h.update(repr((image.mode, image.size, sorted(kwargs.items()), page.text_layer, page.dpi,
                       list(page.flags))).encode())
        h.update(image.tobytes())
        return h.hexdigest()

    def read(self, page: Any, **kwargs: Any) -> Any:
        key = self._key(page, kwargs)
        if key is None:
            return self._engine.read(page, **kwargs)
        path = self._root / key[:2] / f"{key}.pickle"
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        reading = self._engine.read(page, **kwargs)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(reading, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass  # an unpicklable reading is read again next time
        return reading


def wrap_engine(name: str, options: Any, build: Any) -> Any:
    root = os.environ.get(CACHE, "")
    if not root or root == "0" or name == "textlayer":
        return build()
    return CachedEngine(name, options, build, Path(root))

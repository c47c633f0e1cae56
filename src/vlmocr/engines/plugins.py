"""Plugins a run loads by name: VLMOCR_PLUGINS=module[,module…] (modules on the Python path, or
.py files by their path). A
plugin may define `wrap_engine(name, options, build) -> engine`, called for every CPU engine a
worker makes: `build()` makes the engine (models loaded: seconds), and the plugin returns it or
one standing in front of it — which may call `build()` only when a page needs the engine itself. The test suite caches real
engines' readings with one (tests/plugins/reading_cache.py), as OCRmyPDF's tests cache Tesseract's
output; a user may log or time each page's reading the same way. A module that cannot be imported
is a usage error naming it, at the command's start (cli: check_plugins)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from ..exceptions import UsageError

PLUGINS = "VLMOCR_PLUGINS"


def plugin_names(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    raw = (os.environ if environ is None else environ).get(PLUGINS, "")
    return tuple(name.strip() for name in raw.split(",") if name.strip())


@lru_cache(maxsize=8)
def _load(names: tuple[str, ...]) -> tuple[ModuleType, ...]:
    out = []
    for name in names:
        try:
            out.append(_import(name))
        except (ImportError, OSError) as exc:
            raise UsageError(f"environment variable {PLUGINS}: cannot import the plugin {name!r} ({exc})") from None
    return tuple(out)


def _import(name: str) -> ModuleType:
    """A module by name, or a .py file by its path (no PYTHONPATH needed: any Python with vlmocr
    loads it)."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    spec = importlib.util.spec_from_file_location(f"vlmocr_plugin_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ImportError(f"no Python file at {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def check_plugins(environ: Mapping[str, str] | None = None) -> None:
    _load(plugin_names(environ))


def wrap_engine(name: str, options: Mapping[str, Any], build: Callable[[], Any]) -> Any:
    """The engine `build()` makes, as the plugins hand it back (the engine itself when none is
    loaded). Each plugin gets the one before it as its `build`."""
    make = build
    for module in _load(plugin_names()):
        hook = getattr(module, "wrap_engine", None)
        if hook is not None:
            make = functools.partial(hook, name, options, _once(make))
    return make()


def _once(build: Callable[[], Any]) -> Callable[[], Any]:
    """`build`, called at most once however often a plugin asks."""
    made: list[Any] = []

    def once() -> Any:
        if not made:
            made.append(build())
        return made[0]

    return once

"""vLLM's model-info cache, kept between server starts.

Before it loads a model, vLLM inspects the model's class in a fresh Python process (so as not to
initialise CUDA in its own), which imports vLLM and torch a second time: ~20 s per architecture
on a 2-core machine, ~5–10 s on a GPU node, paid again at every start because vlmocr gives each
server a private, empty VLLM_CACHE_ROOT (plan.py: a cache left behind by another job or version
must not break a start). vLLM writes what it learnt to ``VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json``
with the hash of the model's source file, and reads an entry back only when that hash — and the
entry's fields — still match (registry.py, ``_LazyRegisteredModel._load_modelinfo_from_cache``);
anything else is inspected again. So these few small files are the one part of the private cache
that is safe to share: vlmocr copies them into each server's cache before it starts and takes new
ones back after, under ``$VLMOCR_CACHE_DIR/vllm-modelinfos`` (default
``${XDG_CACHE_HOME:-~/.cache}/vlmocr``). A file that cannot be read or written is left alone:
the cost is one inspection, never a failed start."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ...envvars import CACHE_DIR, cache_home
from ...files import write_bytes_atomic

KEPT = "vllm-modelinfos"
SUBDIR = "modelinfos"  # under VLLM_CACHE_ROOT, as vLLM names it
MAX_BYTES = 64 * 1024  # an entry is a few hundred bytes; anything larger is not one
_NAME = re.compile(r"[A-Za-z0-9_.-]+\.json")


def vlmocr_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env[CACHE_DIR]) if env.get(CACHE_DIR) else cache_home(env) / "vlmocr"


def kept_dir(environ: Mapping[str, str] | None = None) -> Path:
    return vlmocr_cache_dir(environ) / KEPT


def _entries(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir()
                if _NAME.fullmatch(p.name) and p.is_file() and not p.is_symlink() and p.stat().st_size <= MAX_BYTES]
    except OSError:
        return []


def _copy(src: Path, dst_dir: Path) -> bool:
    """`src` into `dst_dir` whole, or not at all."""
    try:
        dst_dir.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(dst_dir / src.name, src.read_bytes())
        return True
    except OSError:
        return False


def seed(vllm_cache_root: Path, environ: Mapping[str, str] | None = None) -> int:
    """Copy the kept entries into a server's VLLM_CACHE_ROOT; how many."""
    return sum(_copy(p, vllm_cache_root / SUBDIR) for p in _entries(kept_dir(environ)))


def keep(vllm_cache_root: Path, environ: Mapping[str, str] | None = None) -> int:
    """Take the entries a server wrote (new or changed) back to the kept directory; how many."""
    kept = kept_dir(environ)
    n = 0
    for p in _entries(vllm_cache_root / SUBDIR):
        with contextlib.suppress(OSError):
            if (kept / p.name).read_bytes() == p.read_bytes():
                continue
        n += _copy(p, kept)
    return n

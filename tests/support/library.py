"""A look at what a library or an export wrote: its files' hashes and times, its catalog's rows."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """path → (sha256, mtime_ns) of every file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def catalog_rows(lib: Path, sql: str, *params) -> list[tuple]:
    db = sqlite3.connect(f"file:{lib / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()

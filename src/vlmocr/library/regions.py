"""Where on its page a search hit lies (issue 29): the published page's word positions (a
library keeps each page's record whole, positions included) searched for the query's words;
the hit's region is the box around the first place they occur, in the pixels of the page as
scanned. A page without positions, or whose words do not hold the query's (FTS5 matched a form
the words do not show), has no region."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson

from ..positions.align import word_key
from ..runfolder.record import JsonObject, Row
from .catalog import DOC_PAGES, SearchHit, query_words

def query_terms(query: str) -> list[tuple[str, bool]]:
    """(word's letters, prefix?) of each word of an FTS5 query (catalog.query_words)."""
    terms = [(word_key(w.rstrip("*")), w.endswith("*")) for w in query_words(query)]
    return [t for t in terms if t[0]]


def _matches(word: str, terms: list[tuple[str, bool]]) -> bool:
    key = word_key(word)
    if not key:
        return False
    for term, prefix in terms:
        if key == term or (prefix and key.startswith(term)):
            return True
        # A word broken at the line's end (Haupts- / mann) is found whole by the index.
        if word.rstrip().endswith("-") and len(key) >= 3 and term.startswith(key):
            return True
    return False


def region(row: Row, query: str) -> JsonObject | None:
    """The box (pixels of the page as scanned, with the page's size) around the first run of
    the query's words on the page; None without positions or a match."""
    pos = row.word_positions()
    terms = query_terms(query)
    if pos is None or not terms:
        return None
    words = pos.words()
    for i, w in enumerate(words):
        if _matches(w[5], terms):
            run = [w]
            for nxt in words[i + 1:i + len(terms)]:
                if not _matches(nxt[5], terms):
                    break
                run.append(nxt)
            box = [min(r[0] for r in run), min(r[1] for r in run), max(r[2] for r in run), max(r[3] for r in run)]
            return {"box": box, "width": pos.width, "height": pos.height, "words": [r[5] for r in run]}
    return None


def with_regions(library: Path, hits: list[SearchHit], query: str) -> list[SearchHit]:
    """The hits, each with its region where its page has positions (one page file read a document)."""
    pages: dict[str, dict[int, Row]] = {}
    out = []
    for hit in hits:
        if hit.lib_id not in pages:
            path = library / hit.path / DOC_PAGES
            rows: dict[int, Row] = {}
            try:
                lines = path.read_bytes().splitlines() if path.is_file() else []
            except OSError:
                lines = []  # a document's pages unreadable: its hits keep no region, the others do
            for line in lines:
                try:
                    row = Row.of(orjson.loads(line))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue
                rows[row.page] = row
            pages[hit.lib_id] = rows
        found = pages[hit.lib_id].get(hit.page)
        out.append(dataclasses.replace(hit, region=region(found, query)) if found is not None else hit)
    return out

"""Where on its page a search hit lies: the published page's word positions (a
library keeps each page's record whole, positions included) searched for the query's words. The
hit's region is the box around the query's words where they stand together on the page (a
phrase), else around the first place of its rarest word on the page (`Haupt stadt`: "Haupt" is
everywhere, "stadt" once) — in the pixels of the page's master image as ALTO gives them
(inputs/master.py), else of the page as rendered. Words match as the catalog's index matched them
(case, accents and compatibility forms folded, a word split where the index splits it, a word
broken at the line's end); a page the index found whose words hold no form of the query (the
published text was cleaned) gives the box of its closest word; only a page without positions has
no region."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from pathlib import Path

import orjson
from rapidfuzz import fuzz

from ..inputs.master import Master
from ..positions.align import word_key
from ..runfolder.record import JsonObject, Row, WordBox
from .catalog import DOC_PAGES, SearchHit, query_words

# A word is the closest to a query word the index found on the page when their letters agree at
# least this much (rapidfuzz's ratio, 0–100): a cleaned "Hauptmann" and a raw "Hauptrnann".
MIN_CLOSE = 70
_TOKENS = re.compile(r"\w+")


def _folded(text: str) -> str:
    """Letters as the index's tokenizer keeps them: compatibility forms and case folded, accents
    removed (unicode61 remove_diacritics 2)."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def query_terms(query: str) -> list[tuple[str, bool]]:
    """(word's folded letters, prefix?) of each word of an FTS5 query (catalog.query_words)."""
    terms = [(word_key(_folded(w.rstrip("*"))), w.endswith("*")) for w in query_words(query)]
    return [t for t in terms if t[0]]


def _term_of(word: str, terms: list[tuple[str, bool]]) -> int | None:
    """The index of the first query term `word` holds, None when it holds none."""
    whole = word_key(_folded(word))
    if not whole:
        return None
    parts = [word_key(t) for t in _TOKENS.findall(_folded(word))] or [whole]
    for n, (term, prefix) in enumerate(terms):
        for key in {whole, *parts}:
            if key == term or (prefix and key.startswith(term)):
                return n
        # A word broken at the line's end (Haupts- / mann) is found whole by the index.
        if word.rstrip().endswith("-") and len(whole) >= 3 and term.startswith(whole):
            return n
    return None


def _matches(word: str, terms: list[tuple[str, bool]]) -> bool:
    return _term_of(word, terms) is not None


def _run_from(words: list[WordBox], i: int, terms: list[tuple[str, bool]]) -> list[WordBox]:
    run = [words[i]]
    for nxt in words[i + 1:i + len(terms)]:
        if not _matches(nxt[5], terms):
            break
        run.append(nxt)
    return run


def _place(row: Row, run: list[WordBox], width: int, height: int) -> JsonObject:
    box = (min(r[0] for r in run), min(r[1] for r in run), max(r[2] for r in run), max(r[3] for r in run))
    master = Master.from_json(row.master) if row.master is not None else None
    if master is not None and width and height:
        return {"box": list(master.box(box, width, height)), "width": master.width, "height": master.height,
                "words": [r[5] for r in run], "image": master.of}
    return {"box": list(box), "width": width, "height": height, "words": [r[5] for r in run]}


def region(row: Row, query: str) -> JsonObject | None:
    """The box (see the module) around the query's words on the page, with the size of the image
    it is in; None when the page has no positions or the query no words."""
    pos = row.word_positions()
    terms = query_terms(query)
    if pos is None or not terms:
        return None
    words = pos.words()
    found = [_term_of(w[5], terms) for w in words]
    if len(terms) > 1:
        for i in range(len(words)):  # the query's words together, as a phrase
            if found[i] is not None and len({found[k] for k in range(i, i + len(_run_from(words, i, terms)))}) > 1:
                return _place(row, _run_from(words, i, terms), pos.width, pos.height)
    counts = [found.count(n) for n in range(len(terms))]
    present = [n for n in range(len(terms)) if counts[n]]
    if present:
        rarest = min(present, key=lambda n: (counts[n], -len(terms[n][0])))
        return _place(row, [words[found.index(rarest)]], pos.width, pos.height)
    # The index found the page by a form its raw words do not show (its published text was cleaned):
    # the word closest to the longest query word.
    term = max(terms, key=lambda t: len(t[0]))[0]
    score, best = max(((fuzz.ratio(word_key(_folded(w[5])), term), k) for k, w in enumerate(words)), default=(0, -1))
    return _place(row, [words[best]], pos.width, pos.height) if score >= MIN_CLOSE else None


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

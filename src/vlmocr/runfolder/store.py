"""The page-record store: the only code that touches `pages.jsonl`.

Append-only, one JSON line per finished page attempt, each written with a single `write(2)`
on an O_APPEND descriptor so a kill -9 leaves at most one torn last line, which the next open
repairs. The resume index keeps one byte per page, not the records, so 100 000 pages cost a
few hundred kilobytes."""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..exceptions import VlmocrError
from .record import CODE_STATUS, STATUS_CODE, FigureRecord, JsonObject, JsonValue, PageRecord, Row, Status

log = logging.getLogger(__name__)

PAGES_FILE = "pages.jsonl"
FSYNC_EVERY_S = 2.0


def repair_torn_tail(path: Path) -> int:
    """Cut a torn last line (a write interrupted by kill -9 or a node crash).

    Returns the number of bytes removed. The page it belonged to has no record, so it is
    simply read again: no page is lost and none is duplicated."""
    if not path.exists():
        return 0
    with path.open("rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        # Walk back to the previous newline in blocks.
        pos = size
        block = 65536
        cut = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                cut = start + i + 1
                break
            pos = start
        fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
        return size - cut


def iter_records(path: Path, *, strict: bool = False, heads: bool = False) -> Iterator[JsonObject]:
    """Every parseable record whose check matches, in file order. A bad line (not JSON, or
    failing its CRC-32) is logged with its file:line and skipped (or raised), so the page it
    stood for counts as unread and a record written later for it is the one that counts.
    With `heads`, each record only as far as `_head` reads it (what resume needs)."""
    for _offset, rec in records_with_offsets(path, strict=strict, heads=heads):
        yield rec


def records_with_offsets(path: Path, *, strict: bool = False, heads: bool = False
                         ) -> Iterator[tuple[int, JsonObject]]:
    """iter_records, each record with the byte offset of its line (FinalRecords reads it there)."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            at, offset = offset, offset + len(line)
            if heads and (head := _head(line)) is not None:
                yield at, head
                continue
            rec = _parse(line, path, n, strict)
            if rec is not None:
                yield at, rec


def _parse(line: bytes, path: Path, n: int, strict: bool = False) -> JsonObject | None:
    """One line's record, or None (logged, or raised when `strict`) when it is not one."""
    if not line.strip():
        return None
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        if strict or not line.endswith(b"\n"):
            # A torn last line is expected after a crash; only complain in strict mode.
            if strict:
                raise ValueError(f"{path}:{n}: not a JSON line")
            return None
        log.warning("%s:%d: skipping a line that is not JSON", path, n)
        return None
    if not isinstance(rec, dict):
        return None
    if _check_fails(line, rec):
        if strict:
            raise ValueError(f"{path}:{n}: the line does not match its CRC-32")
        log.warning("%s:%d: skipping a line that does not match its CRC-32 (damaged or edited "
                    "after it was written)", path, n)
        return None
    rec.pop(CHECK_KEY, None)
    return rec


# Every line RecordWriter writes ends with the CRC-32 of the bytes before it:
#   {...,"crc32":"1a2b3c4d"}\n
# so a line is known to be exactly as written (not torn, edited or rotted) without parsing it.
CHECK_KEY = "crc32"
_CHECK_OPEN = b',"crc32":"'
_CHECK_LEN = len(_CHECK_OPEN) + 8 + len(b'"}\n')


def checked_line(data: JsonObject) -> bytes:
    """A record's line: its JSON with the CRC-32 of what precedes it as the last member."""
    if CHECK_KEY in data:  # a record read back and written again: its old check is not ours
        data = {k: v for k, v in data.items() if k != CHECK_KEY}
    body = orjson.dumps(data)[:-1]  # without the closing brace
    return b"%s%s%08x\"}\n" % (body, _CHECK_OPEN, zlib.crc32(body))


def line_intact(line: bytes) -> bool:
    """Does the line end with a CRC-32 that matches what precedes it?"""
    n = len(line) - _CHECK_LEN
    return (n > 0 and line.startswith(_CHECK_OPEN, n) and line.endswith(b'"}\n')
            and b"%08x" % zlib.crc32(memoryview(line)[:n]) == line[-11:-3])


def _check_fails(line: bytes, rec: JsonObject) -> bool:
    """Does a parsed line carry a check that does not match? A line written before lines
    carried one has none and is trusted as before. A check whose own name was damaged still
    counts as a check: the member at the check's place has the check's shape."""
    whole = line.endswith(b"\n")
    if CHECK_KEY not in rec:
        n = len(line) + (0 if whole else 1) - _CHECK_LEN
        if not (n > 0 and line.startswith(b',"', n) and line.startswith(b'":"', n + 7)):
            return False
    # A last line that lost only its newline is still whole when its check matches.
    return not line_intact(line if whole else line + b"\n")


_TEXT_KEY = b',"text":'
_RESUME_FIELDS = ("doc_id", "page", "key", "status", "attempt")


def _head(line: bytes) -> JsonObject | None:
    """A record parsed only up to its text, or None when the line must be parsed whole.

    Records are written with doc_id, page, doc_pages, key, status and attempt before the
    text (record.PageRecord's field order), and the text is most of a line: parsing the head
    alone makes resuming 100 000 pages of real text several times faster. The head alone is
    trusted only when the line's CRC-32 matches (`line_intact`): a line torn, edited or damaged
    after it was written, or written before lines carried a check, is parsed whole, so a
    broken record counts as missing (its page is read again) instead of as done. A quote
    inside a string value is escaped, so the first `,"text":` is the top-level key; a head
    that does not parse as a whole object or lacks a field is also left to the full parse."""
    cut = line.find(_TEXT_KEY)
    if cut <= 0 or not line_intact(line):
        return None
    try:
        head = orjson.loads(line[:cut] + b"}")
    except orjson.JSONDecodeError:
        return None
    return head if isinstance(head, dict) and all(k in head for k in _RESUME_FIELDS) else None


def iter_rows(path: Path) -> Iterator[Row]:
    """Every page record of a pages.jsonl, typed (record.Row), in file order; a line that is not
    a page record (no doc_id, page or status: an edited file) is logged and skipped."""
    for n, rec in enumerate(iter_records(path), 1):
        try:
            yield Row.of(rec)
        except (KeyError, TypeError, ValueError):
            log.warning("%s: record %d is not a page record; skipped", path, n)


def iter_figures(path: Path) -> Iterator[FigureRecord]:
    """Every figure record of a figures.jsonl (vlmocr describe), typed, in file order; a record
    that does not validate (an edited file) is logged and skipped."""
    for n, rec in enumerate(iter_records(path), 1):
        try:
            yield FigureRecord.model_validate(rec)
        except ValueError:  # pydantic's ValidationError is one
            log.warning("%s: record %d is not a figure record; skipped", path, n)


def resume_fields(path: Path) -> Iterator[JsonObject]:
    """Like iter_records, for resume: each record parsed only up to its text (`_head`)."""
    return iter_records(path, heads=True)


def _int(value: JsonValue) -> int:
    """A number read from a stored line; TypeError when it is none (an edited or foreign file)."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"not a number: {value!r}")


def _final_page(rec: JsonObject, path: Path) -> tuple[str, int] | None:
    """The (doc_id, page) a record can be the final one of; None (logged) when it can be none:
    no doc_id or page, or a status this vlmocr does not know (an edited or foreign file). The
    page's earlier record, if any, stays its final one."""
    try:
        page_id = (str(rec["doc_id"]), _int(rec["page"]))
        Status(rec["status"])
    except (KeyError, TypeError, ValueError):
        log.warning("%s: a record of %r page %r with status %r is not a page record this vlmocr reads; skipped",
                    path, rec.get("doc_id"), rec.get("page"), rec.get("status"))
        return None
    return page_id


def _row(rec: JsonObject, path: Path, where: str) -> Row:
    try:
        return Row.of(rec)
    except (KeyError, TypeError, ValueError) as exc:  # a field of another shape (an edited file)
        raise VlmocrError(f"{path}: the record {where} cannot be read as a page record ({exc})") from None


def _wanted(rec: JsonObject, keys: set[str] | None, docs: set[str] | None) -> bool:
    """Is the record of one of `keys` and of one of `docs` (None: any)?"""
    return (keys is None or rec.get("key") in keys) and (docs is None or rec.get("doc_id") in docs)


def final_records(path: Path, keys: set[str] | None = None, docs: set[str] | None = None) -> dict[tuple[str, int], Row]:
    """The last record of each (doc_id, page), optionally for some keys/documents only."""
    out: dict[tuple[str, int], JsonObject] = {}
    for rec in iter_records(path):
        page_id = _final_page(rec, path) if _wanted(rec, keys, docs) else None
        if page_id is not None:
            out[page_id] = rec
    return {page_id: _row(rec, path, f"of {page_id[0]} page {page_id[1]}") for page_id, rec in out.items()}


class FinalRecords(Mapping[tuple[str, int], Row]):
    """The last record of each (doc_id, page), read from the file when asked for: the index holds
    each record's byte offset (found from the records' heads, as resume reads them), never its
    text, so a command that goes through 100 000 pages one at a time holds one page's text at a
    time (`report`, `evaluate` and `export` had held every page's). pages.jsonl is
    append-only, so an offset stays valid while a run goes on writing. The keys come in the order
    of the pages' first records, as `final_records` gives them; `items()` and `values()` in the
    order the final records were written."""

    def __init__(self, path: Path, offsets: dict[tuple[str, int], int]) -> None:
        self.path = path
        self._offsets = offsets
        self._by_doc: dict[str, list[tuple[int, int]]] | None = None

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._offsets)

    def __contains__(self, key: object) -> bool:
        return key in self._offsets

    def __getitem__(self, key: tuple[str, int]) -> Row:
        offset = self._offsets[key]
        with self.path.open("rb") as fh:
            return self._read(fh, offset)

    def _read(self, fh: Any, offset: int) -> Row:
        fh.seek(offset)
        rec = _parse(fh.readline(), self.path, 0)
        if rec is None:  # the line parsed when the index was made: the file changed under us
            raise VlmocrError(f"{self.path}: the record at byte {offset} can no longer be read (the file was "
                              "changed while being read)")
        return _row(rec, self.path, f"at byte {offset}")

    def items(self) -> Iterator[tuple[tuple[str, int], Row]]:  # type: ignore[override]
        """Every final record, read in one forward pass over the file: in the order the final
        records were written (a page read again late comes late), not the index's."""
        with self.path.open("rb") as fh:
            for key, offset in sorted(self._offsets.items(), key=lambda kv: kv[1]):
                yield key, self._read(fh, offset)

    def values(self) -> Iterator[Row]:  # type: ignore[override]
        return (rec for _key, rec in self.items())

    def _pages_by_doc(self) -> dict[str, list[tuple[int, int]]]:
        """{doc_id: [(page, offset)] by page}, grouped once."""
        if self._by_doc is None:
            self._by_doc = {}
            for (doc_id, page), offset in self._offsets.items():
                self._by_doc.setdefault(doc_id, []).append((page, offset))
            for pages in self._by_doc.values():
                pages.sort()
        return self._by_doc

    def documents(self) -> Iterator[tuple[str, list[Row]]]:
        """(doc_id, its final records by page), document by document in doc_id order: one
        document's text in memory at a time."""
        by_doc = self._pages_by_doc()
        with self.path.open("rb") as fh:
            for doc_id in sorted(by_doc):
                yield doc_id, [self._read(fh, offset) for _page, offset in by_doc[doc_id]]

    def doc_ids(self) -> list[str]:
        return sorted(self._pages_by_doc())

    def document(self, doc_id: str) -> dict[int, Row]:
        """One document's final records by page, read now."""
        with self.path.open("rb") as fh:
            return {page: self._read(fh, offset) for page, offset in self._pages_by_doc().get(doc_id, [])}


def final_index(path: Path, keys: set[str] | None = None, docs: set[str] | None = None) -> FinalRecords:
    """`final_records` without the records: where each final record is, read when asked for."""
    offsets: dict[tuple[str, int], int] = {}
    for offset, rec in records_with_offsets(path, heads=True):
        page_id = _final_page(rec, path) if _wanted(rec, keys, docs) else None
        if page_id is not None:
            offsets[page_id] = offset
    return FinalRecords(path, offsets)


@dataclass
class DocState:
    """What resume needs to know of one document under one settings key."""

    doc_pages: int | None = None
    codes: bytearray = field(default_factory=bytearray)  # status code per page (index = page)
    attempts: bytearray = field(default_factory=bytearray)  # attempts so far per page (≤255)

    def _grow(self, page: int) -> None:
        if page >= len(self.codes):
            extra = page + 1 - len(self.codes)
            self.codes.extend(b"\0" * extra)
            self.attempts.extend(b"\0" * extra)

    def set(self, page: int, status: Status, attempt: int) -> None:
        self._grow(page)
        self.codes[page] = STATUS_CODE[status]
        self.attempts[page] = min(max(attempt, self.attempts[page]), 255)

    def status(self, page: int) -> Status | None:
        if page < len(self.codes) and self.codes[page]:
            return CODE_STATUS[self.codes[page]]
        return None

    def attempts_of(self, page: int) -> int:
        return self.attempts[page] if page < len(self.attempts) else 0


class ResumeIndex:
    """(settings key, doc_id) → DocState, built in one streaming pass over pages.jsonl."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], DocState] = {}
        self.records = 0
        self.other_keys = 0

    def get(self, key: str, doc_id: str) -> DocState | None:
        return self.docs.get((key, doc_id))

    def add_record(self, rec: PageRecord) -> None:
        state = self.docs.get((rec.key, rec.doc_id))
        if state is None:
            state = self.docs[(rec.key, rec.doc_id)] = DocState()
        if rec.doc_pages is not None:
            state.doc_pages = rec.doc_pages
        state.set(rec.page, rec.status, rec.attempt)

    def add(self, rec: JsonObject) -> None:
        doc = (str(rec["key"]), str(rec["doc_id"]))
        state = self.docs.get(doc)
        if state is None:
            state = self.docs[doc] = DocState()
        if (pages := rec.get("doc_pages")) is not None:
            state.doc_pages = _int(pages)
        state.set(_int(rec["page"]), Status(rec["status"]), _int(rec.get("attempt", 1)))

    @classmethod
    def load(cls, path: Path, keys: set[str] | None = None) -> "ResumeIndex":
        idx = cls()
        for rec in resume_fields(path):
            try:
                if keys is not None and rec.get("key") not in keys:
                    idx.other_keys += 1
                    continue
                idx.add(rec)
                idx.records += 1
            except (KeyError, ValueError, TypeError):
                log.warning("%s: skipping a record without doc_id/page/key/status", path)
        return idx


class RecordWriter:
    """Appends records, one flushed line each; fsyncs every few seconds and on close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired = repair_torn_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._last_sync = time.monotonic()
        self.written = 0

    def append(self, record: PageRecord | FigureRecord | JsonObject) -> JsonObject:
        """Write one record as one checked line; returns the fields as written."""
        data = record if isinstance(record, dict) else record.to_json_dict()
        line = checked_line(data)
        view = memoryview(line)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.written += 1
        now = time.monotonic()
        if now - self._last_sync > FSYNC_EVERY_S:
            os.fsync(self._fd)
            self._last_sync = now
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def count_lines(paths: Iterable[Path]) -> int:
    return sum(1 for p in paths for _ in iter_records(p))

"""Who is this document? DOI, arXiv id and ISBN found in its own text, with the evidence.

Only the first pages are read (the title page, the abstract, the copyright page), and reading
stops at a reference-list heading ("References", "Bibliography", "Literatur", …): the
identifiers of cited works are not the document's. ISBNs must pass their checksum (ISBN-10
mod 11, ISBN-13 mod 10) and are stored as ISBN-13.

The optional Crossref lookup (`Crossref`) turns a DOI or ISBN into bibliographic metadata. It is
off unless asked for, caches every answer on disk (a second lookup never touches the network),
keeps a polite delay between requests, widens it to the server's announced rate limit
(X-Rate-Limit-Limit / -Interval) and honours 429 Retry-After."""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..files import write_text_atomic
from ..runfolder.record import JsonObject, Row

DEFAULT_CROSSREF = "https://api.crossref.org"
DEFAULT_PAGES = 5
SNIPPET_CHARS = 60

# A heading that opens the reference list: alone on its line, maybe numbered or Markdown-marked.
_REFERENCES = re.compile(
    r"^[\s#*_>]*(?:(?:\d+(?:\.\d+)*|[IVXLC]+)\.?\s+)?"
    r"(references|reference list|bibliography|literatur|literaturverzeichnis|literature|literature cited|"
    r"works cited|cited literature|références|références bibliographiques|bibliographie|quellen|"
    r"quellenverzeichnis|bibliografia|referencias|riferimenti bibliografici)"
    r"[\s*_:.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>{}|\\^`]+)", re.IGNORECASE)
_ARXIV_NEW = re.compile(r"(?:\barXiv\s*:\s*|arxiv\.org/(?:abs|pdf)/)(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
_ARXIV_OLD = re.compile(r"(?:\barXiv\s*:\s*|arxiv\.org/(?:abs|pdf)/)([a-z][a-z\-]+(?:\.[A-Z]{2})?/\d{7})(v\d+)?",
                        re.IGNORECASE)
_ISBN_LABELLED = re.compile(r"\bISBN(?:-1[03])?\s*(?:\(\w+\)\s*)?[:#]?\s*((?:97[89][\s\-‐–]?)?(?:\d[\s\-‐–]?){9}[\dXx])(?![\dXx])")
_ISBN_BARE = re.compile(r"(?<![\d\-])(97[89][\-‐–]\d{1,5}[\-‐–]\d{1,7}[\-‐–]\d{1,7}[\-‐–]\d)(?![\d\-])")


@dataclass
class Identifier:
    type: str  # doi | arxiv | isbn
    value: str  # normalised: DOI lower-case, arXiv id without version, ISBN-13 digits
    page: int
    snippet: str  # the text around the match: the evidence
    match: str = ""  # as printed

    def as_dict(self) -> JsonObject:
        return {"type": self.type, "value": self.value, "page": self.page, "snippet": self.snippet,
                "match": self.match}


def isbn10_ok(digits: str) -> bool:
    if not re.fullmatch(r"\d{9}[\dX]", digits):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
    return total % 11 == 0


def isbn13_ok(digits: str) -> bool:
    if not re.fullmatch(r"97[89]\d{10}", digits):
        return False
    total = sum((1 if i % 2 == 0 else 3) * int(c) for i, c in enumerate(digits))
    return total % 10 == 0


def isbn10_to_13(digits: str) -> str:
    core = "978" + digits[:9]
    check = (10 - sum((1 if i % 2 == 0 else 3) * int(c) for i, c in enumerate(core)) % 10) % 10
    return core + str(check)


def normalise_isbn(printed: str) -> str | None:
    """ISBN-13 digits of a printed ISBN-10 or ISBN-13, or None when the checksum fails."""
    digits = re.sub(r"[^\dXx]", "", printed).upper()
    if len(digits) == 10 and isbn10_ok(digits):
        return isbn10_to_13(digits)
    if len(digits) == 13 and isbn13_ok(digits):
        return digits
    return None


def _clean_doi(raw: str) -> str:
    doi = raw
    while doi and doi[-1] in ".,;:'\"”’»":
        doi = doi[:-1]
    # Drop closing brackets that the DOI did not open ("(doi:10.1/x)").
    for opening, closing in (("(", ")"), ("[", "]")):
        while doi.endswith(closing) and doi.count(closing) > doi.count(opening):
            doi = doi[:-1]
        while doi and doi[-1] in ".,;:":
            doi = doi[:-1]
    return doi


def _snippet(text: str, start: int, end: int) -> str:
    lo = max(0, start - SNIPPET_CHARS)
    hi = min(len(text), end + SNIPPET_CHARS)
    s = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + s + ("…" if hi < len(text) else "")


def front_matter(pages: Iterable[tuple[int, str]], max_pages: int = DEFAULT_PAGES) -> list[tuple[int, str]]:
    """The text of the first pages, cut at the first reference-list heading."""
    out: list[tuple[int, str]] = []
    for page, text in sorted(pages, key=lambda pt: pt[0])[:max_pages]:
        m = _REFERENCES.search(text or "")
        if m:
            out.append((page, text[: m.start()]))
            break
        out.append((page, text or ""))
    return out


def find_identifiers(pages: Iterable[tuple[int, str]], max_pages: int = DEFAULT_PAGES) -> list[Identifier]:
    """Identifiers in the first `max_pages` pages before the reference list, first one first;
    each value once (its first occurrence is the evidence)."""
    found: list[tuple[int, int, Identifier]] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: str, value: str, page: int, text: str, m: re.Match[str], printed: str | None = None) -> None:
        if (kind, value) in seen:
            return
        seen.add((kind, value))
        printed = printed or m.group(1)
        start = m.start(1)
        found.append((page, start, Identifier(kind, value, page, _snippet(text, start, start + len(printed)), printed)))

    for page, text in front_matter(pages, max_pages):
        for m in _DOI.finditer(text):
            doi = _clean_doi(m.group(1))
            if "/" in doi and len(doi.split("/", 1)[1]) >= 1:
                add("doi", doi.lower(), page, text, m, doi)
        for rx in (_ARXIV_NEW, _ARXIV_OLD):
            for m in rx.finditer(text):
                ident = m.group(1)
                if rx is _ARXIV_NEW and not 1 <= int(ident[2:4]) <= 12:
                    continue
                add("arxiv", ident.lower() if rx is _ARXIV_OLD else ident, page, text, m)
        for rx in (_ISBN_LABELLED, _ISBN_BARE):
            for m in rx.finditer(text):
                isbn = normalise_isbn(m.group(1))
                if isbn:
                    add("isbn", isbn, page, text, m)
    found.sort(key=lambda t: (t[0], t[1]))
    return [ident for _page, _pos, ident in found]


def identify_records(records: Iterable[Row], max_pages: int = DEFAULT_PAGES) -> list[Identifier]:
    return find_identifiers(((r.page, r.text) for r in records if r.page > 0), max_pages)


# ------------------------------------------------------------------------------ Crossref


class LookupError_(Exception):
    """The lookup could not be answered now (network, server, rate limit): nothing is cached."""


@dataclass
class CrossrefStats:
    requests: int = 0
    cache_hits: int = 0
    rate_limited: int = 0
    waited: float = 0.0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "rate_limited": self.rate_limited,
                "waited": round(self.waited, 3), "errors": self.errors}


def _retry_after(value: str | None, now: float) -> float | None:
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _interval_seconds(value: str | None) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", value or "")
    if not m:
        return None
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


def summarise_work(message: dict[str, Any]) -> JsonObject:
    """The bibliographic core of a Crossref work."""
    def first(key: str) -> Any:
        v = message.get(key)
        return v[0] if isinstance(v, list) and v else (v if isinstance(v, str) else None)

    year = None
    for key in ("issued", "published-print", "published-online", "created"):
        parts = (message.get(key) or {}).get("date-parts") or []
        if parts and parts[0] and parts[0][0]:
            year = parts[0][0]
            break
    authors = []
    for a in message.get("author") or []:
        name = ", ".join(x for x in (a.get("family"), a.get("given")) if x) or a.get("name")
        if name:
            authors.append(name)
    return {"doi": (message.get("DOI") or "").lower() or None, "title": first("title"), "authors": authors,
            "year": year, "container": first("container-title"), "publisher": message.get("publisher"),
            "type": message.get("type"), "isbn": message.get("ISBN") or None}


class Crossref:
    """A small, polite, cached client of the Crossref REST API (or anything that speaks it)."""

    def __init__(self, base_url: str = DEFAULT_CROSSREF, cache_dir: Path | None = None, *, delay: float = 1.0,
                 mailto: str | None = None, max_retries: int = 3, max_wait: float = 120.0, timeout: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx2 as httpx

        self.base_url = base_url.rstrip("/")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.delay = delay
        self.mailto = mailto
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.sleep = sleep
        self.stats = CrossrefStats()
        self._next_at = 0.0
        from .. import __version__

        ua = f"vlmocr/{__version__} (document library" + (f"; mailto:{mailto})" if mailto else ")")
        self._client = httpx.Client(timeout=timeout, headers={"User-Agent": ua}, follow_redirects=True)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "Crossref":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- cache

    def _cache_path(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.cache_dir / digest[:2] / f"{digest}.json"

    def _cached(self, key: str) -> dict[str, Any] | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None

    def _store(self, key: str, entry: dict[str, Any]) -> None:
        path = self._cache_path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(entry, ensure_ascii=False, sort_keys=True))

    # -------------------------------------------------------------- requests

    def _wait_turn(self) -> None:
        now = time.monotonic()
        if now < self._next_at:
            pause = self._next_at - now
            self.stats.waited += pause
            self.sleep(pause)

    def get(self, path: str, params: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None]:
        """(status, JSON message) for a path under the base URL: from the cache when answered
        before (found or not found); raises LookupError_ when no answer can be had now."""
        params = dict(params or {})
        key = self.base_url + path + ("?" + urllib.parse.urlencode(sorted(params.items())) if params else "")
        hit = self._cached(key)
        if hit is not None:
            self.stats.cache_hits += 1
            return int(hit["status"]), hit.get("message")
        if self.mailto:
            params["mailto"] = self.mailto
        backoff = max(self.delay, 0.5)
        for attempt in range(self.max_retries + 1):
            self._wait_turn()
            self.stats.requests += 1
            try:
                resp = self._client.get(self.base_url + path, params=params or None)
            except Exception as exc:  # httpx.HTTPError and friends: the network, not the answer
                self._next_at = time.monotonic() + self.delay
                if attempt >= self.max_retries:
                    self.stats.errors.append(f"{path}: {type(exc).__name__}: {exc}")
                    raise LookupError_(f"{path}: {exc}") from None
                self._pause(backoff)
                backoff *= 2
                continue
            self._adapt(resp.headers)
            self._next_at = time.monotonic() + self.delay
            if resp.status_code == 429 or resp.status_code >= 500:
                if resp.status_code == 429:
                    self.stats.rate_limited += 1
                wait = _retry_after(resp.headers.get("Retry-After"), time.time())
                if attempt >= self.max_retries or (wait is not None and wait > self.max_wait):
                    self.stats.errors.append(f"{path}: HTTP {resp.status_code}")
                    raise LookupError_(f"{path}: HTTP {resp.status_code} (gave up after {attempt + 1} tries)")
                self._pause(wait if wait is not None else backoff)
                backoff *= 2
                continue
            if resp.status_code in (404, 410):
                self._store(key, {"key": key, "status": resp.status_code, "message": None})
                return resp.status_code, None
            if resp.status_code != 200:
                self.stats.errors.append(f"{path}: HTTP {resp.status_code}")
                raise LookupError_(f"{path}: HTTP {resp.status_code}")
            try:
                message = resp.json().get("message")
            except (ValueError, AttributeError):
                raise LookupError_(f"{path}: not a JSON answer") from None
            self._store(key, {"key": key, "status": 200, "message": message})
            return 200, message
        raise LookupError_(f"{path}: no answer")  # pragma: no cover (the loop returns or raises)

    def _pause(self, seconds: float) -> None:
        seconds = max(0.0, min(seconds, self.max_wait))
        self.stats.waited += seconds
        self.sleep(seconds)
        self._next_at = time.monotonic()

    def _adapt(self, headers: Any) -> None:
        """Widen the delay to the rate limit the server announces (Crossref: 50 per 1 s)."""
        try:
            limit = int(headers.get("X-Rate-Limit-Limit") or 0)
        except ValueError:
            limit = 0
        interval = _interval_seconds(headers.get("X-Rate-Limit-Interval"))
        if limit > 0 and interval:
            self.delay = max(self.delay, interval / limit)

    # -------------------------------------------------------------- lookups

    def work(self, doi: str) -> dict[str, Any] | None:
        status, message = self.get("/works/" + urllib.parse.quote(doi, safe=""))
        return summarise_work(message) if status == 200 and message else None

    def isbn(self, isbn: str) -> dict[str, Any] | None:
        status, message = self.get("/works", {"filter": f"isbn:{isbn}", "rows": "1"})
        items = (message or {}).get("items") or [] if status == 200 else []
        return summarise_work(items[0]) if items else None

    def lookup(self, identifiers: Iterable[Identifier | dict[str, Any]]) -> dict[str, Any] | None:
        """Metadata for the first identifier Crossref knows (DOIs first, then ISBNs; arXiv ids are
        registered with DataCite, not Crossref). None when none is known; LookupError_ when the
        service could not answer."""
        idents = [i.as_dict() if isinstance(i, Identifier) else i for i in identifiers]
        for kind in ("doi", "isbn"):
            for ident in idents:
                if ident["type"] != kind:
                    continue
                value = str(ident["value"])
                meta = self.work(value) if kind == "doi" else self.isbn(value)
                if meta:
                    return {**meta, "matched": {"type": kind, "value": ident["value"]}, "source": self.base_url}
        return None

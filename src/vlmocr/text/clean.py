"""The cleaned layer: rules applied to the raw page records, never to `pages.jsonl` itself.

Cleaning rules change many times during a project, so a cleaned layer is always rebuilt from
the final raw records (the last record of each page) and written beside them:

```
RUN/clean/
  pages.jsonl     one cleaned record per page (the raw record, its text cleaned, plus `clean`)
  docs/<doc>.md   assembled cleaned documents
  rules.json      the rule set, its hash, and the hash of the raw layer it was built from
```

Rules run in this order, each switchable in a TOML file (``clean_rules/default.toml`` holds
the defaults, `vlmocr clean --show-rules` prints them):

1. per page: strip grounding tags (``<|ref|>…<|/ref|>``, ``<|det|>…<|/det|>``, ``<loc_N>``,
   special tokens; `postprocess.strip_grounding`, the parser that reads a model's answer) and a
   Markdown fence around the whole answer; Unicode NFC; historical letter forms folded as an
   OCR-D ground-truth level writes them (``[fold]``, every fold off by default: long s → s,
   r rotunda → r, superscript-e umlauts, ligatures; `historic.py`); collapse residual
   repetition (`loops.detect_loop` / `trim_loop`);
2. per document: remove running headers, footers and page numbers — short lines at the top or
   bottom of a page that recur (digits and roman numerals folded) at the same end of
   neighbouring pages;
3. per page: join words broken at line ends when the joined word is the more plausible one
   (it is in the word list of the page's language; see below), keeping real hyphenated
   compounds; optional quote and dash normalisation and paragraph joining; tidy whitespace.

Dehyphenation decides with the `wordfreq` word list of the page's language: ``com-\\nmittee``
→ ``committee`` (the joined form is a word, a half is not), ``re-\\nport`` → ``report`` (both
halves are words, but the joined word is common beside them), ``self-\\nesteem`` →
``self-esteem`` (the joined form is rare beside its halves), ``Schiller-\\nStraße`` keeps its
hyphen (a capitalised second part). In languages that
write compounds closed and rarely hyphenate them (German, Danish, Dutch, Swedish, Norwegian,
Czech by default) a lower-case continuation is joined even when the joined word is not listed
(inflected and compound forms often are not).

The output is a pure function of the raw records and the rules, so cleaning twice gives the
same bytes, and every page rule is idempotent (cleaning a cleaned text changes nothing).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from rapidfuzz import fuzz

from ..exceptions import UsageError
from ..files import atomic_file, file_sha256, write_json_atomic, write_text_atomic
from ..runfolder.assemble import assemble_markdown
from ..runfolder.record import JsonObject, Row
from ..runfolder.rundir import RunDir
from ..runfolder.store import PAGES_FILE, final_records
from . import historic
from .loops import detect_loop, trim_loop
from .postprocess import strip_fences, strip_grounding
from .textquality import Lexicon, guess_language, lexicon, page_language

CLEAN_DIR = "clean"
RULES_FILE = "rules.json"
# Part of the rule-set hash: a change to what a rule does changes the hash like a change of
# its settings does, so a cleaned layer never claims rules it was not made with.
CLEAN_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HeaderRules(_Strict):
    """Running headers, footers and page numbers, detected across neighbouring pages."""

    enabled: bool = True
    top_lines: int = 2  # non-empty lines examined at the top of each page
    bottom_lines: int = 1  # … and at the bottom (a second line there is often a footnote)
    window: int = 2  # pages at most this far apart are neighbours (2: recto/verso heads alternate)
    min_pages: int = 3  # a header line must recur on this many neighbouring pages, itself included
    page_number_min_pages: int = 2  # a bare page number ("12", "- 12 -", "xii", "Seite 12") needs fewer
    similarity: float = 0.8  # rapidfuzz ratio (0-1) between lines, digits and roman numerals folded
    max_chars: int = 100  # longer lines are body text, never headers


class DehyphenRules(_Strict):
    enabled: bool = True
    hyphens: str = "-¬⸗\u00ad"  # characters that break a word at a line end (soft hyphen: always joined)
    join_unknown_in: list[str] = ["de", "da", "nl", "sv", "nb", "cs"]  # see the module doc
    min_join_ratio: float = 0.05  # both halves words: join when freq(joined) ≥ this × the rarer half's
    unknown: Literal["keep", "join"] = "keep"  # neither form listed, other languages (or no word list)


class FoldRules(_Strict):
    """Historical letter forms → modern ones (text/historic.py says which OCR-D level writes
    each). Opt-in: the raw text keeps what was printed, a transcription may not."""

    long_s: bool = False  # ſ → s (OCR-D level 1)
    r_rotunda: bool = False  # ꝛ → r (level 1)
    superscript_e: bool = False  # aͤ oͤ uͤ → ä ö ü (levels 1 and 2)
    ligatures: bool = False  # ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ → letters (levels 1 and 2)

    def names(self) -> list[str]:
        """The folds switched on, in the order they apply."""
        on = self.model_dump()
        return [name for name in historic.FOLDS if on.get(name)]


class CleanRules(_Strict):
    strip_grounding: bool = True
    strip_fences: bool = True
    nfc: bool = True
    collapse_repetition: bool = True
    normalize_quotes: bool = False  # „“”«» → " and ‘’‚ → '
    normalize_dashes: bool = False  # – — ‒ ― − → -
    join_paragraphs: bool = False  # lines of a paragraph joined into one (Markdown structure kept)
    language: str = "auto"  # word list when a record names none: a code, or auto (guessed per document)
    headers: HeaderRules = HeaderRules()
    dehyphenate: DehyphenRules = DehyphenRules()
    fold: FoldRules = FoldRules()

    def canonical(self) -> JsonObject:
        data = self.model_dump(mode="json")
        if not self.fold.names():
            # No fold switched on does what the rules did before folds existed: the hash, and
            # so every cleaned layer built before them, stays valid.
            del data["fold"]
        return {"clean_version": CLEAN_VERSION, **data}

    @property
    def hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_rules_text() -> str:
    """The shipped default rules file (TOML)."""
    try:
        return resources.files("vlmocr.text").joinpath("clean_rules", "default.toml").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):  # pragma: no cover - an install without package data
        return ""


def parse_rules(text: str, where: str = "rules") -> CleanRules:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not valid TOML ({exc})") from None
    try:
        return CleanRules.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{where}: {problems}") from None


def load_rules(path: Path | str | None = None) -> CleanRules:
    """The rules in `path` (a TOML file; keys left out keep their defaults), or the defaults."""
    if path is None:
        text = default_rules_text()
        return parse_rules(text, "default rules") if text else CleanRules()
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"rules file not found: {p}")
    return parse_rules(p.read_text(encoding="utf-8"), str(p))


# --- page rules ----------------------------------------------------------------------------


def collapse_repetition(text: str) -> tuple[str, int]:
    """Trim loops until none is left; (text, loops trimmed)."""
    trimmed = 0
    for _ in range(10):
        finding = detect_loop(text)
        if finding is None:
            break
        shorter = trim_loop(text, finding)
        if len(shorter) >= len(text):
            break
        text, trimmed = shorter, trimmed + 1
    return text, trimmed


_QUOTES = str.maketrans({"„": '"', "“": '"', "”": '"', "‟": '"', "«": '"', "»": '"', "‘": "'", "’": "'",
                         "‚": "'", "‛": "'", "‹": "'", "›": "'"})
_DASHES = str.maketrans({"–": "-", "—": "-", "‒": "-", "―": "-", "−": "-"})
_STRUCTURE = re.compile(r"^\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>|\||```|<!--)")


def join_paragraphs(text: str) -> str:
    """Join the lines of each paragraph with a space; headings, lists, tables, quotes and fences
    keep their lines."""
    out: list[str] = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        if any(_STRUCTURE.match(ln) for ln in lines):
            out.append("\n".join(lines))
        else:
            out.append(" ".join(lines))
    return "\n\n".join(out)


def tidy(text: str) -> str:
    text = re.sub(r"[ \t]+\n", "\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- dehyphenation -------------------------------------------------------------------------

_WORD = r"[^\W\d_]+"


def _hyphen_re(hyphens: str) -> re.Pattern[str]:
    cls = "".join(re.escape(h) for h in hyphens)
    # left part, a hyphen at the line end, the continuation at the start of the next line, the
    # punctuation glued to it, and the spaces that separate it from the rest of that line.
    return re.compile(rf"(?P<left>{_WORD})(?P<hy>[{cls}])[ \t]*\n[ \t]*(?P<right>{_WORD})(?P<glued>[^\s]*)(?P<gap>[ \t]*)")


def hyphen_decision(left: str, right: str, hy: str, lex: Lexicon | None, rules: DehyphenRules) -> str:
    """'join' (a word broken at the line end), 'keep' (a hyphenated compound) or 'leave'."""
    if hy == "\u00ad":
        return "join"
    if right[0].isupper() and not right.isupper():
        return "keep"  # Schiller-Straße, Nord-Amerika: a capital after a hyphen is a compound
    if lex is not None:
        if lex.lang in rules.join_unknown_in and right[0].islower():
            return "join"
        joined = lex.freq(left + right)
        if lex.known(left) and lex.known(right):
            # Both halves are words: join only when the joined word is common enough beside
            # the rarer half (report = re + port; not selfesteem, wellknown, twentyfive).
            return "join" if joined >= rules.min_join_ratio * min(lex.freq(left), lex.freq(right)) else "keep"
        if joined > 0:
            return "join"
    return "join" if rules.unknown == "join" else "leave"


def dehyphenate(text: str, lex: Lexicon | None, rules: DehyphenRules) -> tuple[str, int]:
    """Join words broken at line ends; (text, words joined or re-joined as compounds).

    The joined word (and the punctuation glued to it) moves up to the end of the first line; the
    rest of the second line stays on its own line, so lines keep their order and count."""
    if not rules.hyphens:
        return text, 0
    pattern = _hyphen_re(rules.hyphens)
    changed = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal changed
        decision = hyphen_decision(m.group("left"), m.group("right"), m.group("hy"), lex, rules)
        if decision == "leave":
            return m.group(0)
        changed += 1
        word = m.group("left") + ("" if decision == "join" else "-") + m.group("right") + m.group("glued")
        rest_follows = m.end() < len(m.string) and m.string[m.end()] != "\n"
        return word + ("\n" if rest_follows else "")

    return pattern.sub(fix, text), changed


def search_text(text: str, lang: str | None) -> str:
    """A page's text as the search index holds it: words broken at a line end joined
    (``Haupts-`` + ``mann`` → ``Hauptsmann``) whatever the cleaning rules say, since a reader
    searches for the word, not its halves. Compounds the word list knows keep their hyphen, so
    both parts stay searchable; a break the word list cannot judge is joined."""
    return dehyphenate(text, lexicon(lang) if lang else None, DehyphenRules(unknown="join"))[0]


# --- running headers, footers, page numbers ------------------------------------------------

_PAGE_NUMBER = re.compile(
    r"^[\s\-–—.(\[]*(?:(?:p|pp|pag|page|s|seite|str|strana|side|feuille|f)\.?\s*)?"
    r"(?:\d{1,4}|[ivxlcdm]{1,7})\s*\*?[\s\-–—.)\]]*$",
    re.IGNORECASE,
)
_ROMAN = re.compile(r"^[ivxlcdm]+$")


def is_page_number(line: str) -> bool:
    return bool(_PAGE_NUMBER.match(line.strip()))


def header_key(line: str) -> str:
    """A line folded for comparison: case, digits and roman numerals, punctuation."""
    s = unicodedata.normalize("NFC", line).casefold()
    s = re.sub(r"\d+", " # ", s)
    s = re.sub(r"[^\w#]+", " ", s).replace("_", " ")
    tokens = ["#" if _ROMAN.match(t) else t for t in s.split()]
    folded: list[str] = []
    for t in tokens:
        if t == "#" and folded and folded[-1] == "#":
            continue
        folded.append(t)
    return " ".join(folded)


@dataclass
class _Edge:
    """The candidate lines at one end of one page: (line index, key, is a page number)."""

    lines: list[tuple[int, str, bool]] = field(default_factory=list)


def _edges(lines: list[str], rules: HeaderRules) -> tuple[_Edge, _Edge]:
    nonempty = [i for i, ln in enumerate(lines) if ln.strip()]
    top_idx = nonempty[: rules.top_lines]
    bottom_idx = [i for i in nonempty[-rules.bottom_lines:] if i not in top_idx] if rules.bottom_lines else []

    def edge(idx: list[int]) -> _Edge:
        e = _Edge()
        for i in idx:
            line = lines[i].strip()
            if len(line) > rules.max_chars:
                continue
            key = header_key(line)
            if key:
                e.lines.append((i, key, is_page_number(line)))
        return e

    return edge(top_idx), edge(bottom_idx)


def find_running_lines(pages: list[tuple[int, str]], rules: HeaderRules) -> dict[int, list[int]]:
    """For a document's pages [(page number, text)], the line indices to remove, by page number."""
    split = {p: text.split("\n") for p, text in pages}
    edges = {p: _edges(split[p], rules) for p, _ in pages}
    numbers = sorted(split)
    remove: dict[int, list[int]] = {}
    for p in numbers:
        neighbours = [q for q in numbers if q != p and abs(q - p) <= rules.window]
        for end in (0, 1):
            for i, key, number in edges[p][end].lines:
                if number:
                    matches = sum(1 for q in neighbours if any(n for _, _, n in edges[q][end].lines))
                    need = rules.page_number_min_pages
                else:
                    matches = sum(
                        1 for q in neighbours
                        if any(fuzz.ratio(key, k) >= rules.similarity * 100 for _, k, _ in edges[q][end].lines)
                    )
                    need = rules.min_pages
                if matches + 1 >= need:
                    remove.setdefault(p, []).append(i)
    return remove


# --- the pipeline --------------------------------------------------------------------------


@dataclass
class PageChanges:
    removed_lines: list[str] = field(default_factory=list)
    dehyphenated: int = 0
    loops_trimmed: int = 0

    def as_dict(self) -> JsonObject:
        return {"removed_lines": self.removed_lines, "dehyphenated": self.dehyphenated,
                "loops_trimmed": self.loops_trimmed}


def clean_page_first(text: str, rules: CleanRules, changes: PageChanges) -> str:
    """The rules that need only the page itself, before the document rules."""
    if rules.strip_grounding:
        text = strip_grounding(text)
    if rules.strip_fences:
        text = strip_fences(text)
    if rules.nfc:
        text = unicodedata.normalize("NFC", text)
    folds = rules.fold.names()
    if folds:
        text = historic.fold(text, folds)
    text = tidy(text)
    if rules.collapse_repetition:
        text, n = collapse_repetition(text)
        changes.loops_trimmed += n
    return text


def clean_page_last(text: str, rules: CleanRules, lex: Lexicon | None, changes: PageChanges) -> str:
    if rules.dehyphenate.enabled:
        text, n = dehyphenate(text, lex, rules.dehyphenate)
        changes.dehyphenated += n
    if rules.normalize_quotes:
        text = text.translate(_QUOTES)
    if rules.normalize_dashes:
        text = text.translate(_DASHES)
    if rules.join_paragraphs:
        text = join_paragraphs(text)
    return tidy(text)


def clean_text(text: str, rules: CleanRules | None = None, lang: str | None = None) -> str:
    """One page cleaned on its own (no header detection: that needs the neighbouring pages)."""
    rules = rules or CleanRules()
    changes = PageChanges()
    text = clean_page_first(text, rules, changes)
    lex = lexicon(lang) if lang else None
    return clean_page_last(text, rules, lex, changes)


def _doc_language(recs: list[Row], rules: CleanRules) -> str | None:
    default = None if rules.language == "auto" else rules.language
    # One guess per document (a page alone may be too short to tell).
    if default is None:
        default = guess_language("\n".join(r.text for r in recs[:20]))
    return default


def clean_document(recs: list[Row], rules: CleanRules) -> list[Row]:
    """Cleaned copies of one document's records (sorted by page), each with a `clean` entry."""
    recs = sorted(recs, key=lambda r: r.page)
    changes = {r.page: PageChanges() for r in recs}
    texts = {r.page: clean_page_first(r.text, rules, changes[r.page]) for r in recs}
    if rules.headers.enabled:
        pages = [(p, t) for p, t in texts.items() if p > 0 and t]
        for p, idx in find_running_lines(pages, rules.headers).items():
            lines = texts[p].split("\n")
            changes[p].removed_lines = [lines[i].strip() for i in sorted(idx)]
            drop = set(idx)
            texts[p] = tidy("\n".join(ln for i, ln in enumerate(lines) if i not in drop))
    doc_default = _doc_language(recs, rules)
    rule_hash = rules.hash
    out = []
    for r in recs:
        p = r.page
        lang, _origin = page_language(r, doc_default)
        lex = lexicon(lang) if lang else None
        text = clean_page_last(texts[p], rules, lex, changes[p])
        out.append(r.amended(text=text, clean={"rules": rule_hash, "language": lang, **changes[p].as_dict()}))
    return out


def clean_records(records: Iterable[Row], rules: CleanRules | None = None) -> list[Row]:
    """Cleaned copies of final records (one per page), sorted by document and page."""
    rules = rules or CleanRules()
    by_doc: dict[str, list[Row]] = {}
    for r in records:
        by_doc.setdefault(r.doc_id, []).append(r)
    out: list[Row] = []
    for doc_id in sorted(by_doc):
        out += clean_document(by_doc[doc_id], rules)
    return out


@dataclass
class CleanResult:
    out_dir: Path
    rules_hash: str
    pages: int
    docs: int
    changed: int
    removed_lines: int
    dehyphenated: int
    loops_trimmed: int

    def as_dict(self) -> JsonObject:
        return {"out": str(self.out_dir), "rules_hash": self.rules_hash, "pages": self.pages, "docs": self.docs,
                "changed": self.changed, "removed_lines": self.removed_lines,
                "dehyphenated": self.dehyphenated, "loops_trimmed": self.loops_trimmed}

    def line(self) -> str:
        return (f"Cleaned {self.pages} pages in {self.docs} docs (rules {self.rules_hash[:12]}): "
                f"changed={self.changed} removed_lines={self.removed_lines} "
                f"dehyphenated={self.dehyphenated} loops_trimmed={self.loops_trimmed} → {self.out_dir}")


def clean_run(run_dir: Path, rules: CleanRules | None = None) -> CleanResult:
    """Build RUN/clean/ from the final records of RUN/pages.jsonl (which is only read)."""
    rules = rules or load_rules()
    raw = RunDir(run_dir).pages
    if not raw.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    raw_sha = file_sha256(raw)

    finals = RunDir(run_dir).reading()  # the folder's reading, not the last record of any

    out = run_dir / CLEAN_DIR
    docs_dir = out / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    pages = changed = removed = joined = trimmed = 0
    written: set[str] = set()
    # Document by document, in doc_id order: one document's text in memory at a time.
    with atomic_file(RunDir(run_dir).clean_pages) as tmp, tmp.open("wb") as fh:
        for doc_id, recs in finals.documents():
            raw_text = {r.page: r.text for r in recs}
            cleaned = clean_document(recs, rules)
            for rec in cleaned:
                fh.write(orjson.dumps(dict(rec.data)) + b"\n")
                what = rec.extra("clean")
                pages += 1
                changed += rec.text != raw_text[rec.page]
                removed += len(what["removed_lines"])
                joined += what["dehyphenated"]
                trimmed += what["loops_trimmed"]
            with_pages = [r for r in cleaned if r.page > 0]
            write_text_atomic(docs_dir / f"{doc_id}.md", assemble_markdown(with_pages or cleaned))
            written.add(doc_id)
    for stale in docs_dir.glob("*.md"):
        if stale.stem not in written:
            stale.unlink()

    result = CleanResult(out_dir=out, rules_hash=rules.hash, pages=pages, docs=len(written), changed=changed,
                         removed_lines=removed, dehyphenated=joined, loops_trimmed=trimmed)
    # No timestamp: the same raw layer and rules give the same bytes.
    write_json_atomic(out / RULES_FILE, {
        "rules_hash": rules.hash, "rules": rules.canonical(),
        "raw": {"file": PAGES_FILE, "sha256": raw_sha, "pages": len(finals)},
        "summary": {k: v for k, v in result.as_dict().items() if k not in ("out", "rules_hash")},
    })
    return result


def cleaned_layer_status(run_dir: Path, rules: CleanRules | None = None) -> str:
    """'current', 'missing', 'stale' (the raw layer changed since) or 'other-rules'."""
    info_path = run_dir / CLEAN_DIR / RULES_FILE
    run = RunDir(run_dir)
    if not info_path.is_file() or not run.clean_pages.is_file():
        return "missing"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return "missing"
    if info.get("raw", {}).get("sha256") != file_sha256(run.pages):
        return "stale"
    if rules is not None and info.get("rules_hash") != rules.hash:
        return "other-rules"
    return "current"


def cleaned_records(run_dir: Path, rules: CleanRules | None = None) -> tuple[dict[tuple[str, int], Row], str]:
    """The cleaned final records of a run: from RUN/clean when it is current, else cleaned in
    memory now from the raw layer (nothing written). Returns (records, where they came from)."""
    status = cleaned_layer_status(run_dir, rules)
    if status == "current":
        return final_records(RunDir(run_dir).clean_pages), "layer"
    if not RunDir(run_dir).pages.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    recs = clean_records(RunDir(run_dir).reading().values(), rules or load_rules())
    return {r.page_id: r for r in recs}, f"in memory ({status} layer)"

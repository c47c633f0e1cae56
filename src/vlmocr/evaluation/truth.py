"""Ground truth: one page type, one loader (a folder or a CSV), and its matching to documents.

Folder: every ``name.txt`` (searched recursively, hidden folders skipped) is the truth of the
document ``name`` — its page image ``name.png|jpg|tif|…|pdf`` beside it when there is one
(``name.png`` + ``name.txt``, as in the development pages): of page 1, or of pages 1…N when it holds
N pages separated by form feeds (``\f``, what pdftotext and ``vlmocr export --format txt``
write between pages; a form feed at the very end closes the last page and starts none) — and
``name.pN.txt`` is the truth of page N alone (unless a file ``name.pN.<image>`` says the ``.pN``
belongs to the name; a form feed inside it is an error). The doc id is the one a folder run
derives from the relative path; the set is the first folder, if any.

CSV (``*.csv``): the document as ``doc_id`` or as ``image``/``path`` (the file, relative to the
CSV; its doc id derived as a folder run would), an optional ``page`` (default 1), and the truth as
``truth_path`` (a file), ``truth`` (a file, or the text itself) or ``text`` (the text); ``set``
and ``language`` columns are used — so the development pages' pages.csv works as it is. A row without a
page whose truth has form feeds is the truth of pages 1…N, as in a folder. Two truths for one
page are an error.

Matching (`match_truth`) maps truth doc ids to a run's doc ids: the document whose original file
is the truth's image, else the same id, else the id without its leading folders (``ehri_en__x`` →
``x``), else the same file stem — a guess only when exactly one truth document claims it.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ..envvars import TRUTH_OUTSIDE, env_flag
from ..exceptions import UsageError
from ..inputs.sources import SUPPORTED_EXTS, derive_doc_id

_PAGE_SUFFIX = re.compile(r"^(.*)\.p(\d+)$")
_PAGE_FILE = re.compile(r"^p?(\d{1,6})$")  # DOC/p0001.txt, DOC/0001.txt: page files in a document's folder
_NUMBERED = re.compile(r"^(.+?)[_-](\d{1,6})$")  # doc_0001.gt.txt
GT_TXT = ".gt.txt"
# What `evaluate` says it recognised (and lists when nothing matched).
LAYOUTS = ("name.txt beside name.png|pdf (form feeds between pages)", "name.pN.txt", "DOC/p0001.txt or DOC/0001.txt",
           "doc_0001.gt.txt", "PAGE-XML", "ALTO", "CSV (doc_id|image|path|pdf, page, truth_path|truth|text)")
PAGE_BREAK = "\f"  # between the pages of one truth text
_DOC_COLUMNS = ("doc_id", "image", "path", "pdf", "file")
_TRUTH_COLUMNS = ("truth_path", "truth", "text")


@dataclass
class TruthPage:
    doc_id: str
    page: int
    text: str
    set: str = ""
    language: str | None = None
    origin: str = ""  # the truth file (or CSV row) it came from: what messages name
    image: str | None = None  # absolute path of the page image or document, when the truth names one
    # The truth named no page (a plain name.txt, a CSV row without one) and held no form feed: it
    # is page 1 of a document that may have more (evaluate says so when the run's has more).
    unpaged: bool = False
    layout: str = ""  # which of LAYOUTS it came in

    @property
    def stem(self) -> str:
        """The file name without extension: the last resort for matching."""
        return Path(self.image).stem if self.image else self.doc_id.rsplit("__", 1)[-1]


def _read(path: Path, where: str = "") -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 ({exc.reason} at byte {exc.start})"
        raise UsageError(f"{where + ': ' if where else ''}cannot read truth {path}: {reason}") from None


def split_pages(text: str) -> list[str]:
    """The pages of a truth text, separated by form feeds: each page without the line breaks
    around its form feeds; a form feed at the very end (pdftotext ends every page with one)
    starts no page. A text without a form feed is one page."""
    parts = text.split(PAGE_BREAK)
    if len(parts) > 1 and not parts[-1].strip():
        parts.pop()
    return [p.strip("\r\n") for p in parts] if len(parts) > 1 else parts


def _pages_of(doc_id: str, text: str, origin: str, page: int | None, **kw: object) -> list[TruthPage]:
    """The truth pages one text stands for: page `page` when it names one (then it must hold
    one page), else pages 1…N of its form-feed-separated pages."""
    parts = split_pages(text)
    if page is not None:
        if len(parts) > 1:
            raise UsageError(f"{origin}: the truth of page {page} holds {len(parts)} pages separated by form "
                             "feeds (\\f): give one file for the whole document, or one page per file")
        return [TruthPage(doc_id, page, text, origin=origin, **kw)]  # type: ignore[arg-type]
    if len(parts) == 1:
        return [TruthPage(doc_id, 1, text, origin=origin, unpaged=True, **kw)]  # type: ignore[arg-type]
    return [TruthPage(doc_id, n, part, origin=f"{origin} (page {n} of {len(parts)})", **kw)  # type: ignore[arg-type]
            for n, part in enumerate(parts, 1)]


def _truth_from_dir(root: Path) -> list[TruthPage]:
    from .truth_xml import xml_truth

    files = sorted(p for p in root.rglob("*")
                   if not any(part.startswith(".") for part in p.relative_to(root).parts) and p.is_file())
    for f in files:
        if f.suffix.lower() in (".txt", ".xml"):  # read (and shown in reports): a link out is refused
            _inside(f, root, str(root))
    # (folder, name) → the document or page image `name.<ext>` there: what a `.txt` is the truth of.
    beside: dict[tuple[Path, str], Path] = {}
    for f in files:
        if f.suffix.lower() in SUPPORTED_EXTS:
            beside.setdefault((f.parent, f.stem), f)
    pages: list[TruthPage] = []
    for f in files:
        lower = f.name.lower()
        if lower.endswith(".xml"):
            found = xml_truth(f)
            if found is None:
                continue  # an XML that is no PAGE-XML or ALTO (a METS file, say)
            layout, text, named = found
            stem = f.name[:-4]
            if stem.lower().endswith((".alto", ".page")):  # doc.alto.xml (vlmocr's export), doc.page.xml
                stem = stem[:-5]
        elif lower.endswith(".txt"):
            layout, text, named = "", _read(f), None
            stem = f.name[:-len(GT_TXT)] if lower.endswith(GT_TXT) else f.stem
        else:
            continue
        rel = f.relative_to(root)
        doc_rel, page, image, how = _whose(f, rel, stem, beside, gt=lower.endswith(GT_TXT))
        if image is None and named:  # PAGE-XML's imageFilename, ALTO's fileName
            candidate = f.parent / named
            image = candidate if candidate.is_file() else None
        pages += _pages_of(derive_doc_id(doc_rel), text, str(f), page,
                           set=rel.parts[0] if len(rel.parts) > 1 and doc_rel.count("/") >= 1 else "",
                           image=os.path.abspath(image) if image else None, layout=layout or how)
    if not pages:
        raise UsageError(f"{root}: no truth found; the layouts read: {'; '.join(LAYOUTS)}")
    return pages


def _whose(f: Path, rel: Path, stem: str, beside: dict[tuple[Path, str], Path],
           gt: bool) -> tuple[str, int | None, Path | None, str]:
    """(the document's relative path, its page or None, its image, the layout) of a truth file."""
    image = beside.get((f.parent, stem))
    if image is not None:
        return rel.with_name(stem).as_posix(), None, image, LAYOUTS[0]
    if m := _PAGE_SUFFIX.match(stem):
        return rel.with_name(m.group(1)).as_posix(), int(m.group(2)), beside.get((f.parent, m.group(1))), LAYOUTS[1]
    if (m := _PAGE_FILE.match(stem)) and len(rel.parts) > 1:
        # DOC/p0001.txt: the folder is the document (its file beside the folder, when there is one)
        folder = rel.parent
        return folder.as_posix(), int(m.group(1)), beside.get((f.parent.parent, f.parent.name)), LAYOUTS[2]
    if gt and (m := _NUMBERED.match(stem)):
        return rel.with_name(m.group(1)).as_posix(), int(m.group(2)), beside.get((f.parent, m.group(1))), LAYOUTS[3]
    return rel.with_name(stem).as_posix(), None, None, LAYOUTS[0]


def _inside(path: Path, root: Path, where: str) -> Path:
    """`path`, when it lies inside the truth's own folder `root` once links are followed; else a
    usage error naming it (VLMOCR_TRUTH_OUTSIDE=1 allows it). A truth set comes from others and
    what it names is read into reports that are shared: `../../etc/passwd`, an absolute path or a
    link out of the folder is not followed on its word."""
    if env_flag(TRUTH_OUTSIDE):
        return path
    real, top = os.path.realpath(path), os.path.realpath(root)
    if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
        raise UsageError(f"{where}: {path} lies outside the truth's folder {root} (it resolves to {real}); "
                         f"a truth set only names files in its own folder — {TRUTH_OUTSIDE}=1 allows others")
    return path


def _row_text(row: dict[str, str | None], base: Path, where: str) -> tuple[str, str]:
    """(text, origin) of one CSV row: a file named by truth_path or truth (in the CSV's folder),
    else inline text."""
    named = (row.get("truth_path") or "").strip()
    ref = named or (row.get("truth") or "").strip()
    if not ref:
        if row.get("text") is not None:
            return row["text"] or "", where
        return "", where  # an empty truth cell: the truth of a blank page
    tpath = Path(ref) if Path(ref).is_absolute() else base / ref
    if tpath.is_file():
        return _read(_inside(tpath, base, where), where), str(tpath)
    if named or ref.lower().endswith(".txt"):
        raise UsageError(f"{where}: truth file not found: {tpath}")
    return ref, where  # the `truth` cell holds the text itself


def _truth_from_csv(path: Path) -> list[TruthPage]:
    base = path.parent
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        if not (set(_DOC_COLUMNS) & cols) or not (set(_TRUTH_COLUMNS) & cols):
            raise UsageError(f"{path}: a truth CSV needs a document column ({' or '.join(_DOC_COLUMNS)}) and a "
                             f"truth column ({' or '.join(_TRUTH_COLUMNS)})")
        pages: list[TruthPage] = []
        for n, row in enumerate(reader, 2):
            where = f"{path}:{n}"
            image = (row.get("image") or row.get("path") or row.get("pdf") or row.get("file") or "").strip()
            doc_id = (row.get("doc_id") or "").strip() or (derive_doc_id(image) if image else "")
            if not doc_id:
                raise UsageError(f"{where}: no doc_id and no image")
            try:
                page = int(row["page"]) if (row.get("page") or "").strip() else None
            except ValueError:
                raise UsageError(f"{where}: page {row.get('page')!r} is not a number") from None
            text, origin = _row_text(row, base, where)
            set_name = (row.get("set") or "").strip()
            if not set_name and "/" in image.strip("/"):
                set_name = image.strip("/").split("/")[0]
            pages += _pages_of(doc_id, text, origin, page, set=set_name,
                               language=(row.get("language") or "").strip() or None,
                               image=os.path.abspath(base / image) if image else None, layout=LAYOUTS[-1])
    if not pages:
        raise UsageError(f"{path}: no rows")
    return pages


def load_truth(path: Path | str) -> list[TruthPage]:
    """Truth pages from a folder or a CSV; two truths for one page are an error."""
    p = Path(path)
    if p.is_dir():
        pages = _truth_from_dir(p)
    elif p.is_file() and p.suffix.lower() == ".csv":
        pages = _truth_from_csv(p)
    elif p.is_file():
        raise UsageError(f"{p}: truth must be a folder or a .csv file")
    else:
        raise UsageError(f"truth not found: {p}")
    seen: dict[tuple[str, int], str] = {}
    for t in pages:
        if (t.doc_id, t.page) in seen:
            raise UsageError(f"duplicate truth for {t.doc_id} page {t.page}: {seen[(t.doc_id, t.page)]} and {t.origin}")
        seen[(t.doc_id, t.page)] = t.origin
    return pages


def match_truth(truth: list[TruthPage], doc_ids: Iterable[str],
                originals: Mapping[str, str] | None = None) -> dict[str, str]:
    """truth doc_id → run doc_id, for the truth documents that match one.

    `originals` (run doc_id → its original file, when known) lets a truth page's image name its
    document. Each rule in turn — same file, same id, the id without leading folders, the same
    file stem — maps a truth document only when it alone claims a run document no earlier rule
    gave away: an ambiguous guess is no match."""
    have = set(doc_ids)
    by_path: dict[str, str] = {}
    stems: dict[str, list[str]] = {}
    for doc_id, original in (originals or {}).items():
        by_path[os.path.abspath(original)] = doc_id
        by_path[os.path.realpath(original)] = doc_id
        stems.setdefault(Path(original).stem, []).append(doc_id)
    first: dict[str, TruthPage] = {}
    for t in truth:
        first.setdefault(t.doc_id, t)
    ids = sorted(first)
    out: dict[str, str] = {}

    def claim(pairs: Iterable[tuple[str, str | None]]) -> None:
        claims: dict[str, list[str]] = {}
        for tid, cand in pairs:
            if cand is not None and tid not in out:
                claims.setdefault(cand, []).append(tid)
        taken = set(out.values())
        for cand, tids in claims.items():
            if len(tids) == 1 and cand not in taken:
                out[tids[0]] = cand

    def same_file(t: TruthPage) -> str | None:
        if not t.image or not by_path:
            return None
        return by_path.get(os.path.abspath(t.image)) or by_path.get(os.path.realpath(t.image))

    def same_stem(t: TruthPage) -> str | None:
        found = stems.get(t.stem, [])
        return found[0] if len(found) == 1 else None

    claim((tid, same_file(first[tid])) for tid in ids)
    claim((tid, tid if tid in have else None) for tid in ids)
    claim((tid, next(iter(_shorter_ids(tid, have)), None)) for tid in ids)
    claim((tid, same_stem(first[tid])) for tid in ids)
    return out


def _shorter_ids(tid: str, have: set[str]) -> list[str]:
    """`tid` without 1, 2, … of its leading folders, those that are run doc ids."""
    parts = tid.split("__")
    return [c for c in ("__".join(parts[k:]) for k in range(1, len(parts))) if c in have]

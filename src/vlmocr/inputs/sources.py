"""Find documents: files, folders (recursive, sorted, symlink-loop safe) and manifests."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..exceptions import UsageError
from .skipped import SkippedFiles

PDF_EXTS = {".pdf"}
# DjVu is read through DjVuLibre's tools (djvu.py: Debian djvulibre-bin), every other image by Pillow:
# JPEG 2000 (.jp2 the file format, .j2k/.j2c/.jpc bare codestreams, .jpf/.jpx its extension), BMP,
# GIF (one page: an animation's first frame) and the PNM family (.pbm .pgm .ppm .pnm).
DJVU_EXTS = {".djvu", ".djv"}
IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".jp2", ".j2k", ".j2c", ".jpc", ".jpf", ".jpx",
              ".bmp", ".dib", ".gif", ".pbm", ".pgm", ".ppm", ".pnm"} | DJVU_EXTS
SUPPORTED_EXTS = PDF_EXTS | IMAGE_EXTS
MAX_ID_BYTES = 180
# Names Windows (and file systems shared with it) reserve whatever the extension: docs/CON.md
# cannot be created there. Compared case-insensitively, on the part before the first dot.
RESERVED_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$",
                            *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))})
# A spreadsheet reads a cell starting with one of these as a formula (`=cmd|' /C calc'!A0`).
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# original_path: where a staged (ASCII symlink) path came from; records name it as `source`.
# language: the document's language (a Tesseract name or an ISO 639-1 code: grc, frk, de), which
# the quality signal judges its pages by, above a guess from the text and above --lang.
MANIFEST_COLUMNS = {"doc_id", "path", "pages", "dpi", "priority", "original_path", "language", "language_from",
                    "hard"}  # leaves room for suffixes like ".md" under the usual 255-byte name limit


@dataclass(frozen=True)
class Document:
    doc_id: str
    path: Path
    source: str  # the input path as the user gave it (or as the manifest spelled it)
    pages: tuple[int, ...] | None = None  # explicit 1-based selection, None = every page
    dpi: float | None = None  # per-document override from a manifest
    language: str | None = None  # the manifest's language column (Tesseract's names: manifest_language)
    # Where it came from: "" a person (the column as written), "triage" a suggestion (`vlmocr manifest
    # --triage`): it chooses the engine and judges the pages, but is no one's word that the text must
    # be in it (wrong_language).
    language_from: str = ""
    # The manifest's `hard` column: why a person marked the document hard for the CPU tiers
    # (handwriting, tables …): with `--vlm-tier` its pages go on to the VLM whatever their signal.
    hard: str = ""

    @property
    def kind(self) -> str:
        ext = self.path.suffix.lower()
        if ext in PDF_EXTS:
            return "pdf"
        if ext in IMAGE_EXTS:
            return "image"
        return "unsupported"


def parse_pages(spec: str) -> tuple[int, ...]:
    """'1-3,7' → (1, 2, 3, 7). Pages are 1-based; ranges are inclusive."""
    pages: set[int] = set()
    for part in str(spec).replace(" ", "").split(","):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad page range {part!r} (expected e.g. '1-3,7')")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if lo < 1 or hi < lo:
            raise ValueError(f"bad page range {part!r} (pages are 1-based, low-high)")
        if hi - lo > 1_000_000:
            raise ValueError(f"page range {part!r} is implausibly large")
        pages.update(range(lo, hi + 1))
    if not pages:
        raise ValueError(f"empty page selection {spec!r}")
    return tuple(sorted(pages))


def printable(text: str) -> str:
    """`text` with the bytes of a file name that are not UTF-8 (another locale's name, which
    Python keeps as lone surrogates) spelled as \\xNN: records, CSV files and terminals take
    only valid Unicode, and one such name must not stop a whole run."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte (e.g. from JSON "\\ud800")
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unprintable_path(text: str) -> Path | None:
    """The file whose name `printable` spelled as `text`, when `text` names no file itself and
    such a file exists (a triage CSV or manifest written from a non-UTF-8 name)."""
    if "\\x" not in text or os.path.lexists(text):
        return None
    raw = re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), text.encode("utf-8"))
    path = Path(os.fsdecode(raw))
    return path if os.path.lexists(path) else None


def neutralise_cell(value: str) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula: a leading quote before
    a formula character (and before a leading quote, so `restore_cell` is exact)."""
    if value[:1] in CSV_FORMULA_START or (value[:1] == "'" and value[1:2] in (*CSV_FORMULA_START, "'")):
        return "'" + value
    return value


def restore_cell(value: str) -> str:
    """The value `neutralise_cell` was given."""
    if value[:1] == "'" and value[1:2] in (*CSV_FORMULA_START, "'"):
        return value[1:]
    return value


def is_reserved_name(name: str) -> bool:
    """CON, nul.v2, Com1…: a name Windows-shared file systems refuse (see RESERVED_NAMES)."""
    return name.split(".", 1)[0].rstrip(" ").upper() in RESERVED_NAMES


def collision_key(doc_id: str) -> str:
    """Doc ids with the same key name the same files on a case-insensitive, normalising file
    system (macOS, Windows, many network shares): `same` and `SAME`, é and e + ◌́."""
    return unicodedata.normalize("NFC", doc_id).casefold()


def check_doc_id(doc_id: str) -> str | None:
    """Why `doc_id` is unsafe as a file name, or None when it is fine."""
    if not doc_id:
        return "it is empty"
    if any("\ud800" <= c <= "\udfff" for c in doc_id):
        return "it is not valid Unicode"
    if doc_id in (".", "..") or doc_id.startswith("."):
        return "it starts with '.'"
    if "/" in doc_id or "\\" in doc_id:
        return "it contains a path separator"
    if any(unicodedata.category(c) == "Cc" for c in doc_id):
        return "it contains a control character"
    if len(doc_id.encode("utf-8")) > MAX_ID_BYTES:
        return f"it is longer than {MAX_ID_BYTES} bytes"
    if is_reserved_name(doc_id):
        return "it is a reserved device name on Windows (CON, PRN, AUX, NUL, COM1-9, LPT1-9)"
    if doc_id[-1] in ". ":
        return "it ends with a dot or a space (Windows drops them: two ids would name one file)"
    return None


def derive_doc_id(rel: str) -> str:
    """A file-name-safe id from a relative path: 'a/b c.pdf' → 'a__b c'.

    Deterministic from the path alone, so the same file keeps its id across runs whatever
    else the folder holds."""
    stem = rel
    suffix = Path(rel).suffix
    if suffix.lower() in SUPPORTED_EXTS:
        stem = rel[: -len(suffix)]
    parts = [p for p in re.split(r"[\\/]+", stem) if p not in ("", ".")]
    text = "__".join(parts)
    # A byte that is not UTF-8 (kept by Python as a lone surrogate) becomes %NN: the id stays
    # valid Unicode, and names that differ only in such bytes keep distinct ids.
    text = re.sub("[\udc80-\udcff]", lambda m: f"%{ord(m.group()) - 0xDC00:02X}", text)
    text = "".join("_" if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)
    text = unicodedata.normalize("NFC", text).lstrip(".") or "_"
    if len(text.encode("utf-8")) > MAX_ID_BYTES:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        text = text.encode("utf-8")[: MAX_ID_BYTES - 14].decode("utf-8", "ignore") + "--" + digest
    if text[-1] in ". ":
        text += "_"
    return unreserved(text)


def unreserved(name: str) -> str:
    """`name`, or for a Windows device name the same with '_' after its first part:
    CON → CON_, nul.v2 → nul_.v2 (still told apart from the rest)."""
    if not is_reserved_name(name):
        return name
    head, dot, tail = name.partition(".")
    return f"{head}_{dot}{tail}"


def walk_folder(root: Path, skipped: SkippedFiles | None = None) -> Iterator[Path]:
    """Supported files under `root`, sorted, following symlinks but never entering a loop. Every
    other file goes to `skipped` by type, and every hidden entry (.git, .DS_Store) is counted
    there without being walked into (skipped.py says why)."""
    seen: set[tuple[int, int]] = set()

    def visit(folder: Path) -> Iterator[Path]:
        try:
            st = folder.stat()
        except OSError:
            return
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            return  # a symlink loop or a second link to a folder already walked
        seen.add(ident)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith("."):
                if skipped is not None:
                    skipped.add_hidden()
                continue
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False  # a link to itself: listed, so it gets a bad_input record
            if is_dir:
                yield from visit(path)
            elif path.suffix.lower() in SUPPORTED_EXTS:
                yield path
            elif skipped is not None:
                skipped.add(printable(str(path)), path.relative_to(root).as_posix())

    yield from visit(root)


def from_paths(paths: Iterable[str | Path], skipped: SkippedFiles | None = None) -> list[Document]:
    docs: list[Document] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            for f in walk_folder(p, skipped):
                rel = f.relative_to(p).as_posix()
                docs.append(Document(derive_doc_id(rel), f, printable(str(f))))
        else:
            # Missing or unsupported files given by name become bad_input records, so the
            # user sees them in the results instead of a run that silently skipped them.
            docs.append(Document(derive_doc_id(p.name), p, printable(str(given))))
    return docs


def from_manifest(manifest: str | Path) -> list[Document]:
    m = Path(manifest)
    if not m.is_file():
        raise UsageError(f"manifest not found: {m}")
    base = m.parent
    rows: list[tuple[int, dict]] = []
    if m.suffix.lower() in (".jsonl", ".ndjson"):
        # surrogateescape: a path that is not UTF-8 comes back as the bytes dedup/manifest wrote
        with m.open(encoding="utf-8", errors="surrogateescape") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{m}:{n}: not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise UsageError(f"{m}:{n}: expected a JSON object")
                rows.append((n, row))
    else:
        with m.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames or "path" not in reader.fieldnames:
                raise UsageError(f"{m}: a manifest needs a 'path' column (doc_id,path[,pages,dpi])")
            unknown = set(reader.fieldnames) - MANIFEST_COLUMNS
            if unknown:
                raise UsageError(f"{m}: unknown column(s) {sorted(unknown)}")
            for n, row in enumerate(reader, 2):
                # cells `vlmocr manifest` neutralised against spreadsheet formulas
                rows.append((n, {k: restore_cell(v) if isinstance(v, str) else v for k, v in row.items()}))
    docs: list[Document] = []
    for n, row in rows:
        where = f"{m}:{n}"
        raw_path = str(row.get("path") or "").strip()
        if not raw_path:
            raise UsageError(f"{where}: empty path")
        path = Path(raw_path)
        if not path.is_absolute():
            path = base / path
        path = unprintable_path(str(path)) or path
        doc_id = str(row.get("doc_id") or "").strip() or derive_doc_id(raw_path)
        why = check_doc_id(doc_id)
        if why:
            raise UsageError(f"{where}: doc_id {doc_id!r} is not safe as a file name: {why}")
        pages = None
        if row.get("pages") not in (None, ""):
            try:
                pages = parse_pages(str(row["pages"]))
            except ValueError as exc:
                raise UsageError(f"{where}: {exc}") from None
        dpi = None
        if row.get("dpi") not in (None, ""):
            try:
                dpi = float(row["dpi"])
            except ValueError:
                raise UsageError(f"{where}: dpi {row['dpi']!r} is not a number") from None
            if not 10 <= dpi <= 1200:
                raise UsageError(f"{where}: dpi {dpi} outside 10..1200")
        original = str(row.get("original_path") or "").strip()
        language = manifest_language(row.get("language"), where)
        language_from = str(row.get("language_from") or "").strip()
        if language_from not in ("", "person", "triage"):
            raise UsageError(f"{where}: language_from {language_from!r}: person or triage (a suggestion)")
        hard = printable(str(row.get("hard") or "").strip())
        docs.append(Document(doc_id, path, printable(original or raw_path), pages, dpi, language,
                             "" if language_from == "person" else language_from, hard))
    return docs


def manifest_language(value: object, where: str) -> str | None:
    """A manifest's language cell as Tesseract names it ('de' → 'deu', 'grc', 'deu+lat'), None
    when empty. A name that is no Tesseract language (Debian's list, tessdata's, or installed
    here) is a usage error: a typo must not silently leave the pages judged by a guess."""
    if value is None or str(value).strip() == "":
        return None
    # Imported here: sources sits low in the import floors (evaluation and report build on it).
    from ..languages import canonical_lang, unknown_names

    try:
        lang = canonical_lang(str(value).strip())
    except ValueError as exc:
        raise UsageError(f"{where}: language {exc}") from None
    why = unknown_names(lang)
    if why:
        raise UsageError(f"{where}: language {why}")
    return lang


def discover(paths: Iterable[str | Path] = (), manifest: str | Path | None = None,
             skipped: SkippedFiles | None = None) -> list[Document]:
    """Every document to read, validated before any work starts; the files of folders that are
    no documents go to `skipped`."""
    docs = from_paths(paths, skipped)
    if manifest is not None:
        docs += from_manifest(manifest)
    if not docs:
        left = skipped.phrase() if skipped is not None else ""
        raise UsageError("no documents found (give files, folders or --manifest)" + (f": {left}" if left else ""))
    seen: dict[str, Document] = {}  # by collision_key
    for d in docs:
        why = check_doc_id(d.doc_id)
        if why:
            raise UsageError(f"{d.source}: derived doc_id {d.doc_id!r} is unsafe: {why}")
        other = seen.get(collision_key(d.doc_id))
        if other is not None:
            how = "duplicate doc_id" if other.doc_id == d.doc_id else (
                "doc_ids that differ only in case or Unicode form (one file on macOS/Windows)")
            ids = repr(d.doc_id) if other.doc_id == d.doc_id else f"{other.doc_id!r} and {d.doc_id!r}"
            raise UsageError(f"{how} {ids}: {other.source!r} and {d.source!r} "
                             "(rename one, or give ids in a --manifest)")
        seen[collision_key(d.doc_id)] = d
    return docs


def shard_of(doc_id: str, n: int) -> int:
    """Stable 1-based shard of a document: a growing manifest never reshuffles old ones."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")
    return h % n + 1


def parse_shard(spec: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec or "")
    if not m:
        raise UsageError(f"--shard {spec!r}: expected K/N, e.g. 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    if not (n >= 1 and 1 <= k <= n):
        raise UsageError(f"--shard {spec!r}: K must be in 1..N")
    return k, n

"""The files a folder walk finds that are no documents: every one is accounted for, none silently
dropped. A `.docx` beside the scans is counted by its type, and its path is listed (the first
`MAX_PATHS` of them in run.json: a corpus with a million stray files must not make a million-line
run.json), so `vlmocr run` can say "skipped 3 files: 2 .docx, 1 .xml" and triage can list them all.

Hidden entries (a name starting with '.': .git, .DS_Store, ._scan.pdf, .Trash) are ignored, not
walked into: version-control folders, system files and editor leftovers are no one's documents, and
listing a .git folder file by file would bury the files that matter. They are counted (one per
hidden file or folder, whatever it holds), so a user can still see that something was left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TypedDict

from ..runfolder.record import JsonObject

MAX_PATHS = 100  # paths listed in run.json; counts cover every file
MAX_TYPES = 100  # distinct types counted; more (a name per file: x.0001, x.0002…) go to OTHER_TYPES
OTHER_TYPES = "(other types)"


class SkippedCounts(TypedDict, total=False):
    """What a summary carries (`SkippedFiles.counts()`): files by type, hidden entries ignored."""

    files: int
    types: dict[str, int]
    hidden: int
NO_EXTENSION = "(no extension)"


def file_type(name: str) -> str:
    """What a skipped file is called by: its extension in lower case, '.docx'."""
    suffix = PurePath(name).suffix.lower()
    return suffix if suffix and len(suffix) <= 16 else NO_EXTENSION


@dataclass
class SkippedFiles:
    """The tally a walk keeps. `keep_all` keeps every path (triage lists each file); otherwise the
    first MAX_PATHS."""

    keep_all: bool = False
    files: int = 0
    hidden: int = 0
    types: dict[str, int] = field(default_factory=dict)
    # (path as shown, type, path relative to the folder walked)
    paths: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, shown: str, rel: str) -> None:
        kind = file_type(rel)
        if kind not in self.types and len(self.types) >= MAX_TYPES:
            kind = OTHER_TYPES
        self.files += 1
        self.types[kind] = self.types.get(kind, 0) + 1
        if self.keep_all or len(self.paths) < MAX_PATHS:
            self.paths.append((shown, kind, rel))

    def add_hidden(self) -> None:
        self.hidden += 1

    def counts(self) -> SkippedCounts:
        """The totals (for a run's summary): files by type, and hidden entries ignored."""
        types = dict(sorted(self.types.items(), key=lambda kv: (-kv[1], kv[0])))
        return {"files": self.files, "types": types, "hidden": self.hidden}

    def as_dict(self) -> JsonObject:
        """The totals and the paths kept (run.json's `skipped`)."""
        listed = self.paths if self.keep_all else self.paths[:MAX_PATHS]
        counts = self.counts()
        return {"files": self.files, "types": counts.get("types", {}), "hidden": self.hidden,
                "paths": [{"path": p, "type": t} for p, t, _ in listed], "paths_listed": len(listed)}

    def phrase(self, most: int = 6) -> str:
        """'skipped 3 files: 2 .docx, 1 .xml; ignored 4 hidden entries' — '' when nothing was left out."""
        return phrase(self.counts(), most)


def phrase(counts: SkippedCounts, most: int = 6) -> str:
    """`SkippedFiles.phrase` from its `counts()` (as a summary carries them)."""
    parts = []
    files = int(counts.get("files") or 0)
    if files:
        types = sorted((counts.get("types") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{n} {t}" for t, n in types[:most])
        more = f", {sum(n for _, n in types[most:])} of {len(types) - most} other types" if len(types) > most else ""
        parts.append(f"skipped {files} file{'s' if files != 1 else ''}: {shown}{more}")
    hidden = int(counts.get("hidden") or 0)
    if hidden:
        parts.append(f"ignored {hidden} hidden entr{'ies' if hidden != 1 else 'y'}")
    return "; ".join(parts)

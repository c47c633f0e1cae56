"""The counts issue 28 ("a typed spine") is judged by, over src/vlmocr:

  dict[str, Any]        annotations of untyped dicts (goal: under 120)
  rec["…"] outside      records read by string key outside the store and RunDir (goal: none)
  PAGES_FILE outside    `run_dir / PAGES_FILE` style paths built outside RunDir (goal: none)
  files naming engines  modules that spell an OCR engine's name (goal: the engine's own file, the registry)
  files driving SLURM   modules besides cluster/slurm/jobs.py (the batch system's one interface,
                        jobs.BatchSystem) whose code calls a SLURM command: a name spelt like one
                        (a function sbatch, scancel …) or an argv that starts with one
                        (["sbatch", …]); prose, help and data keys do not count (goal: none)

    python scripts/spine_counts.py          # the counts, and the files behind each
    python scripts/spine_counts.py --quiet  # the counts only
"""

from __future__ import annotations

import argparse
import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "vlmocr"
SPINE = {"store.py", "rundir.py"}  # where records and run-folder paths may be handled by name

PATTERNS = {
    "dict[str, Any]": re.compile(r"dict\[str, Any\]"),
    'rec["…"] outside the store and RunDir': re.compile(r"\brecs?\[\s*[\"']"),
    "PAGES_FILE outside RunDir": re.compile(r"/ PAGES_FILE\b"),
    "files naming an OCR engine": re.compile(r"[\"'](tesseract|rapidocr)[\"']"),
}
SLURM_METRIC = "files besides cluster/slurm/jobs.py driving a SLURM command"
SLURM_SEAM = "cluster/slurm/jobs.py"
SLURM_COMMAND = re.compile(r"(sbatch|scontrol|squeue|sacct|scancel)(_\w+)?$")
PER_FILE = {"files naming an OCR engine", SLURM_METRIC}  # count files, not sites


def slurm_calls(source: str) -> int:
    """Sites where code drives SLURM: a name spelt like a command (sbatch, scontrol_release) or a
    list that starts with a command's name as a string (an argv)."""
    n = 0
    prev: tokenize.TokenInfo | None = None
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]
    for i, tok in enumerate(toks):
        if tok.type == tokenize.NAME and SLURM_COMMAND.match(tok.string):
            n += 1
        elif (tok.type == tokenize.STRING and prev is not None and prev.string == "["
              and SLURM_COMMAND.match(tok.string.strip("\"'")) and i + 1 < len(toks) and toks[i + 1].string == ","):
            n += 1
        prev = tok
    return n


def counts() -> dict[str, tuple[int, dict[str, int]]]:
    out: dict[str, tuple[int, dict[str, int]]] = {}
    files = sorted(SRC.rglob("*.py"))
    for name, pattern in PATTERNS.items():
        where: dict[str, int] = {}
        for path in files:
            rel = str(path.relative_to(SRC))
            if "outside" in name and path.name in SPINE:
                continue
            n = len(pattern.findall(path.read_text(encoding="utf-8")))
            if n:
                where[rel] = n
        total = len(where) if name in PER_FILE else sum(where.values())
        out[name] = (total, where)
    where = {}
    for path in files:
        rel = str(path.relative_to(SRC))
        if rel != SLURM_SEAM:
            n = slurm_calls(path.read_text(encoding="utf-8"))
            if n:
                where[rel] = n
    out[SLURM_METRIC] = (len(where), where)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quiet", action="store_true", help="the counts only")
    args = ap.parse_args()
    for name, (total, where) in counts().items():
        print(f"{total:6d}  {name}")
        if not args.quiet:
            for rel, n in sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))[:12]:
                print(f"          {n:4d} {rel}")
            if len(where) > 12:
                print(f"          … and {len(where) - 12} more files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

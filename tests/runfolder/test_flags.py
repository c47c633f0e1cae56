"""The flag vocabulary (runfolder/flags.py): every flag a record carries is written from one form and
read back by the same form — by the report's flags table and evaluate's per-flag scores — and no
module writes a flag by hand."""

from __future__ import annotations

import ast
import json
import string
from html import escape
from pathlib import Path

import pytest

from support.cli import cli_in_process
from vlmocr.runfolder.flags import Flag, flag_name, parse_flag

SRC = Path(__file__).resolve().parents[2] / "src" / "vlmocr"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _sample_values(flag: Flag) -> dict[str, str]:
    names = [f for _, f, _, _ in string.Formatter().parse(flag.value.form) if f]
    return {n: f"v{i}x" for i, n in enumerate(names)}


@pytest.mark.parametrize("flag", list(Flag), ids=lambda f: f.name)
def test_every_flag_reads_back_as_itself_with_its_values(flag):
    values = _sample_values(flag)
    text = flag.of(**values)
    assert parse_flag(text) == (flag, values)
    assert flag_name(text) == flag.name and flag.found(["other", text]) and flag.values([text]) == values
    assert flag.means and flag.value.about


def test_the_forms_records_have_always_had_parse():
    # Written by earlier vlmocr versions as f-strings: old runs read the same.
    seen = {
        "rotated:90": (Flag.rotated, {"turn": "90"}),
        "osd_confidence:12.3": (Flag.osd_confidence, {"confidence": "12.3"}),
        "finish_length": (Flag.finish_length, {}),  # itself, not finish_{reason} of "length"
        "finish_abort": (Flag.finish_other, {"reason": "abort"}),
        "unsupported_by_rapidocr:0.12": (Flag.unsupported_by, {"engine": "rapidocr", "share": "0.12"}),
        "unsupported_passage_by_tesseract:44": (Flag.unsupported_passage_by, {"engine": "tesseract", "run": "44"}),
        "vlm_tier_unsupported_by_tesseract:0.20": (Flag.vlm_tier_unsupported_by,
                                                   {"engine": "tesseract", "share": "0.20"}),
        "lines_turned:270:0.84": (Flag.lines_turned, {"turn": "270", "score": "0.84"}),
        "osd_overruled:180>0:0.41": (Flag.osd_overruled, {"proposed": "180", "kept": "0", "score": "0.41"}),
        "cleaned:flatten+sauvola": (Flag.cleaned, {"how": "flatten+sauvola"}),
        "fallback_reason:ladder exhausted": (Flag.fallback_reason, {"why": "ladder exhausted"}),
    }
    for text, want in seen.items():
        assert parse_flag(text) == want, text
    assert parse_flag("made_up:3") == (None, {}) and flag_name("made_up:3") == "made_up"
    assert len({f.value.form for f in Flag}) == len(Flag)


def _handwritten_flags(tree: ast.AST) -> list[int]:
    """Lines where a string literal or f-string goes into something named like flags: an
    `….append(…)`/`extend`, a `flags=` keyword, a `"flags":` key, an assignment to a `…flags` name,
    or a list beside `*….flags`."""

    def named_flags(node: ast.AST) -> bool:
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        return "flags" in name.lower()

    def literal(node: ast.AST) -> bool:
        return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))

    def in_list(node: ast.AST) -> list[int]:
        if isinstance(node, (ast.List, ast.Tuple)):
            return [e.lineno for e in node.elts if literal(e)]
        if isinstance(node, ast.BinOp):
            return in_list(node.left) + in_list(node.right)
        if isinstance(node, ast.IfExp):
            return in_list(node.body) + in_list(node.orelse)
        return []

    bad: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend") \
                and named_flags(node.func.value):
            bad += [a.lineno for a in node.args if literal(a)] + [x for a in node.args for x in in_list(a)]
        elif isinstance(node, ast.keyword) and node.arg and "flags" in node.arg:
            bad += in_list(node.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "flags":
                    bad += in_list(v)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(named_flags(t) for t in targets) and node.value is not None:
                bad += in_list(node.value)
        elif isinstance(node, ast.List) and any(isinstance(e, ast.Starred) and named_flags(e.value) for e in node.elts):
            bad += [e.lineno for e in node.elts if literal(e)]
    return sorted(set(bad))


def test_no_module_writes_a_page_flag_by_hand():
    found = []
    for path in sorted((SRC / d for d in ("reading", "engines", "inputs", "text", "positions", "runfolder")),
                       key=str):
        for py in sorted(path.rglob("*.py")):
            lines = _handwritten_flags(ast.parse(py.read_text(encoding="utf-8")))
            found += [f"{py.relative_to(SRC)}:{n}" for n in lines]
    assert found == [], "flags written by hand (use runfolder.flags.Flag.X.of(...)): " + ", ".join(found)


def test_the_scan_sees_a_flag_written_by_hand():
    tree = ast.parse('flags.append("rotated:90")\nrec = {"flags": [*r.flags, f"ladder:{n}"]}\n'
                     'x = PageRecord(flags=["textlayer"])\nflags += [f"a:{b}"]\nok = [Flag.textlayer.of()]\n')
    assert _handwritten_flags(tree) == [1, 2, 3, 4]


def test_evaluate_scores_the_pages_of_each_flag_and_the_report_lists_them(tmp_path):
    run = tmp_path / "run"
    res = cli_in_process("run", str(SAMPLES / "born-digital.pdf"), "--out", str(run), "--engine", "textlayer",
                         "--workers", "1")
    assert res.returncode == 0, res.stderr
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "born-digital.txt").write_text((SAMPLES / "born-digital.txt").read_text(encoding="utf-8"),
                                            encoding="utf-8")
    res = cli_in_process("evaluate", str(run), "--truth", str(truth), "--json")
    assert res.returncode == 0, res.stderr
    flags = json.loads(res.stdout)["flags"]
    pages = sum(1 for line in (run / "pages.jsonl").read_text().splitlines() if line.strip())
    assert flags["textlayer"]["pages"] == pages and flags["textlayer"]["means"] == Flag.textlayer.means
    assert 0 <= flags["textlayer"]["cer"] < 0.05
    res = cli_in_process("report", str(run), "--out", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    assert 'id="flags-table"' in html and "<code>textlayer</code>" in html and escape(Flag.textlayer.means) in html

"""Write runfolder/record.py's Row fields and Row.of from PageRecord's fields: the record's fields have
one source (PageRecord), and Row — the record read back without validating it again — is made
from it. Run after changing PageRecord's fields; tests/runfolder/test_record.py fails until then.

    python scripts/make_row.py            rewrite the generated part of record.py
    python scripts/make_row.py --check    exit 1 when it is not what PageRecord makes"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "src" / "vlmocr" / "runfolder" / "record.py"
BEGIN = "    # --- made by scripts/make_row.py from PageRecord's fields; run it after changing them ---\n"
END = "    # --- end of what scripts/make_row.py makes ---\n"

# PageRecord's type (as written) → Row's type and how a stored line's value becomes it (`v`: the
# value, d.get(name)). Immutable where PageRecord's is a list; `positions` and `master` stay as
# stored (parsed when asked for: a page holds hundreds of words most readers never look at).
BY_TYPE: dict[str, tuple[str, str]] = {
    "str": ("str", 'str({v} or "")'),
    "int": ("int", "int({v} or {default})"),
    "float": ("float", "float({v} or {default})"),
    "int | None": ("int | None", "_int({v})"),
    "float | None": ("float | None", "_float({v})"),
    "str | None": ("str | None", "{v}"),
    "Status": ("Status", "Status({v})"),
    "list[str]": ("tuple[str, ...]", "tuple({v} or ())"),
    "JsonObject | None": ("Mapping[str, Any] | None", "_mapping({v})"),
    "list[JsonObject] | None": ("tuple[Mapping[str, Any], ...] | None", "_mappings({v})"),
    "list[Block] | None": ("tuple[Block, ...] | None", "_blocks({v})"),
    "Positions | None": ("Mapping[str, Any] | None", "_mapping({v})"),
}
# Fields read otherwise than their type says.
BY_NAME: dict[str, tuple[str, str]] = {
    "schema_": ("int", 'int(d.get("schema") or SCHEMA)'),  # stored under its alias
    "doc_id": ("str", 'str(d["doc_id"])'),  # a line without them is no record
    "page": ("int", 'int(d["page"])'),
    "status": ("Status", 'Status(d["status"])'),
    "quality": ("Signal | None", '_signal(d.get("quality"))'),
}


def render() -> str:
    sys.path.insert(0, str(REPO / "src"))
    from vlmocr.runfolder.record import PageRecord

    fields, args = [], []
    for name, info in PageRecord.model_fields.items():
        written = str(PageRecord.__annotations__[name])
        if name in BY_NAME:
            row_type, conv = BY_NAME[name]
        else:
            if written not in BY_TYPE:
                raise SystemExit(f"make_row.py: PageRecord.{name} is {written}: say in BY_TYPE what Row makes of it")
            row_type, conv = BY_TYPE[written]
            default = info.default if isinstance(info.default, (int, float)) and not isinstance(info.default, bool) else 0
            conv = conv.format(v=f'd.get("{name}")', default=repr(default))
        fields.append(f"    {name}: {row_type}\n")
        args.append(f"            {name}={conv},\n")
    return (BEGIN + "".join(fields) + "    data: Mapping[str, Any]  # the line as stored\n\n"
            "    @classmethod\n"
            '    def of(cls, d: Mapping[str, Any]) -> "Row":\n'
            "        return cls(\n" + "".join(args) + "            data=d)\n" + END)


def rewrite(text: str, block: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"make_row.py: {RECORD} has no generated part (its markers are gone)")
    return pattern.sub(lambda _: block, text, count=1)


def main(argv: list[str]) -> int:
    text = RECORD.read_text(encoding="utf-8")
    new = rewrite(text, render())
    if "--check" in argv:
        if new != text:
            print(f"{RECORD.relative_to(REPO)}: Row is not what PageRecord makes: run python scripts/make_row.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        RECORD.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

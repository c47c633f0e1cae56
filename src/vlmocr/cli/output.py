"""How a command hands over its result: with --json the JSON on stdout (for a pipe) and the
one-line summary on stderr (a person watching still reads it); else the line on stdout."""

from __future__ import annotations

import json

from ..progress import console


def emit(data: object, line: str, json_out: bool) -> None:
    if json_out:
        print(json.dumps(data, default=str), flush=True)
        console.print(line, markup=False, highlight=False)
    else:
        print(line, flush=True)


# The --truth option of evaluate, report and compare: the layouts it reads (evaluation/truth.py).
TRUTH_HELP = ("Ground truth, in any of these layouts: a folder of name.txt beside name.png (a document's pages "
              "separated by form feeds), DOC/p0001.txt, name_0001.gt.txt, PAGE-XML or ALTO files; or a CSV "
              "(doc_id|image|path, page, truth_path|truth|text). docs/your-collection.md has an example of each.")

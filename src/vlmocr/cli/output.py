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

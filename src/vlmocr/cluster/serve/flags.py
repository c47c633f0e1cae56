"""A flag's value on a server command line: ``--flag VALUE`` and ``--flag=VALUE`` alike (the last
argument with no value after it gives "")."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def flag_value(argv: Sequence[str], names: Collection[str]) -> str | None:
    """The value of the first of ``names`` found in ``argv``, None when none is there."""
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names:
            return value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    return None

"""Secrets out of what vlmocr writes: run.json, the catalog, messages, records.

An endpoint URL may carry a user and password (a proxy with basic auth); an argument vector may
carry that URL. Both are kept only in memory, for the request header."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def public_url(url: str) -> str:
    """The URL without user and password."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=host))


def public_argv(argv: list[str]) -> list[str]:
    """`argv` with every URL's credentials taken out (`--endpoint http://u:p@host` and
    `--endpoint=http://u:p@host` alike)."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        if "://" in value and "@" in value:
            value = public_url(value)
        out.append(f"{name}{eq}{value}" if eq else value)
    return out

"""Endpoint credentials that never land in a file anyone else can read, nor in `ps`.

Three ways to give them, none of which writes a secret into run.json, a record, a job script or
jobs.json: ``VLMOCR_API_KEY`` / ``OPENAI_API_KEY`` (a bearer key, in the environment), a user and
password in the endpoint URL (kept in memory for the header; `redact.public_url` everywhere
else), and ``VLMOCR_CREDENTIALS_FILE``: a file of mode 600 with ``api_key = …`` or ``user = …`` and
``password = …`` lines, named by its path, so a secret is in no argument vector at all.

A SLURM job given an endpoint URL with a password gets the URL without it, and the credentials
in RUN/slurm/credentials (mode 600, folder mode 700), named by ``VLMOCR_CREDENTIALS_FILE`` in the
script: the script and jobs.json hold a path, never the secret."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .exceptions import UsageError
from .redact import public_argv, public_url

ENV_CREDENTIALS_FILE = "VLMOCR_CREDENTIALS_FILE"
JOB_CREDENTIALS = "credentials"  # RUN/slurm/credentials
_KEYS = ("api_key", "user", "password")


@dataclass(frozen=True)
class Credentials:
    api_key: str | None = None
    user: str | None = None
    password: str | None = None

    @property
    def basic(self) -> bool:
        return self.user is not None or self.password is not None

    def text(self) -> str:
        return "".join(f"{k} = {v}\n" for k, v in (("api_key", self.api_key), ("user", self.user),
                                                     ("password", self.password)) if v is not None)


def url_credentials(url: str) -> Credentials | None:
    """The user and password an endpoint URL carries, None when it carries none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return Credentials(user=unquote(parts.username or ""), password=unquote(parts.password or ""))


def read_credentials(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The file ``VLMOCR_CREDENTIALS_FILE`` names, None when unset. One that others may read, or
    that says nothing usable, is a usage error naming it (exit 3)."""
    env = os.environ if environ is None else environ
    name = env.get(ENV_CREDENTIALS_FILE, "").strip()
    if not name:
        return None
    path = Path(name).expanduser()
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{ENV_CREDENTIALS_FILE}={name}: cannot read it ({exc.strerror or exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"{ENV_CREDENTIALS_FILE}={name}: others can read it (mode {stat.S_IMODE(mode):o}); "
                         f"chmod 600 {name}")
    found: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = (part.strip() for part in line.partition("="))
        if not eq or key not in _KEYS:
            raise UsageError(f"{ENV_CREDENTIALS_FILE}={name}:{n}: expected `api_key = …`, `user = …` or "
                             "`password = …` (the line is not shown: it may hold a secret)")
        found[key] = value
    creds = Credentials(**found)
    if not (creds.api_key or creds.basic):
        raise UsageError(f"{ENV_CREDENTIALS_FILE}={name}: no api_key, user or password in it")
    if creds.api_key and creds.basic:
        raise UsageError(f"{ENV_CREDENTIALS_FILE}={name}: give an api_key or a user and password, not both")
    return creds


def write_private(path: Path, text: str) -> Path:
    """``text`` into ``path`` readable by its owner only (the folder too): created 600, never
    widened for a moment, replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def secrets_out_of_job(folder: Path, argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` for a job script without any URL password, and what the script exports instead:
    the credentials moved to ``folder``/credentials (mode 600) and its path in
    ``VLMOCR_CREDENTIALS_FILE``. Several URLs with different credentials are refused."""
    found = {c for c in (url_credentials(a.partition("=")[2] if a.startswith("--") and "=" in a else a)
                         for a in argv if "://" in a and "@" in a) if c is not None}
    if not found:
        return list(argv), {}
    if len(found) > 1:
        raise UsageError("the job's arguments carry URLs with different credentials: give one endpoint, or put "
                         f"the credentials in a file named by {ENV_CREDENTIALS_FILE}")
    path = write_private(Path(folder) / JOB_CREDENTIALS, found.pop().text())
    return public_argv(list(argv)), {ENV_CREDENTIALS_FILE: str(path)}


__all__ = ["Credentials", "ENV_CREDENTIALS_FILE", "public_url", "read_credentials", "secrets_out_of_job",
           "url_credentials", "write_private"]

"""The file system's rules every folder of vlmocr keeps: one holder of a directory at a time
(DirLock), files written whole or not at all (the atomic writers), and output folders replaced
whole, never someone else's (OutputBuild). On the ground floor: the run folder, the library,
exports and reports all stand on it; and whether an output path can be written at all."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .exceptions import RunLocked, UsageError, VlmocrError

# ------------------------------------------------------------------------------ output paths
#
# Can an output path be written? Asked before any work starts, so a typo in `--out` costs one
# line and exit 3 (`UsageError`), not a traceback after the first hour of reading.
#
# The check needs no side effect: nothing is created here. It catches what a user gets wrong
# (an existing file where a folder is wanted and the reverse, a parent that is a file, a folder
# they may not write); a refusal it cannot foresee (root on a read-only mount) still ends in one
# line, through the command line's last resort for OSError (cli.main).


def _nearest_existing(path: Path) -> Path:
    """`path` or the closest of its parents that exists (as anything, even a dangling link)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(path.anchor or ".")


def check_output_path(path: str | os.PathLike[str], option: str = "--out", *, folder: bool) -> None:
    """Refuse (exit 3) an output `path` that cannot be created or written: a folder when
    `folder`, else a file (written under a temporary sibling and renamed over it)."""
    given = Path(path)
    target = Path(os.path.abspath(given))
    if os.path.lexists(target):
        if folder and not target.is_dir():
            raise UsageError(f"{option} {given} exists and is not a folder; give a new or empty folder")
        if not folder and target.is_dir():
            raise UsageError(f"{option} {given} is a folder; give a file name")
        where = target if folder else target.parent
        if not os.access(where, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {given}: the folder {where} is not writable")
        return
    parent = _nearest_existing(target.parent)
    if not parent.is_dir():
        raise UsageError(f"{option} {given}: cannot create it, {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {given}: cannot create it, the folder {parent} is not writable")


# What marks a folder that only its own command writes: a run (its raw layer and settings) and a
# library (its catalogue). Another command writing there could replace RUN/pages.jsonl itself.
RUN_MARKERS = ("pages.jsonl", "run.json")
LIBRARY_MARKERS = ("catalog.sqlite",)


def owning_folder(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """The run or library folder ``path`` lies in (itself or a parent), and which it is."""
    target = Path(os.path.abspath(path))
    for folder in (target, *target.parents):
        if any((folder / m).is_file() for m in RUN_MARKERS):
            return folder, "run"
        if any((folder / m).is_file() for m in LIBRARY_MARKERS):
            return folder, "library"
    return None


def check_new_output(path: str | os.PathLike[str], option: str, *, folder: bool = False,
                     overwrite: bool = False) -> None:
    """The one rule of every command that writes a file or a folder of its own: a file
    that exists is refused unless ``overwrite``; nothing is written inside a run or a library
    folder, whatever is asked (only the run, and publish, write there); then `check_output_path`."""
    owner = owning_folder(Path(path) if folder else Path(path).parent)
    if owner is not None:
        where, kind = owner
        raise UsageError(f"{option} {path}: {where} is a {kind} folder, which only "
                         f"{'the run' if kind == 'run' else 'publish'} writes; write elsewhere")
    if not folder and os.path.lexists(path) and not os.path.isdir(path) and not overwrite:
        raise UsageError(f"{option} {path} exists; give a new name, or --overwrite to replace it")
    check_output_path(path, option, folder=folder)


class DirLock:
    """One holder at a time of a directory: fcntl.flock on DIR/.lock, which names its holder
    ("pid N on HOST") for the message a second process gets. The kernel drops the lock when
    its holder dies, even by kill -9. A second process fails at once, or waits when asked."""

    error: type[VlmocrError] = RunLocked
    kind = "directory"
    busy = "{dir} is in use by {holder}"

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / ".lock"
        self._fh: Any = None

    def acquire(self, wait: bool = False, on_wait: Callable[[str], None] | None = None,
                timeout: float | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = self.path.open("a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            message = self.busy.format(dir=self.path.parent, holder=holder)
            if not wait:
                fh.close()
                raise self.error(message) from None
            if on_wait is not None:
                on_wait(f"waiting for the {self.kind} lock: {message}")
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() > deadline:
                        fh.close()
                        raise self.error(f"{message} (waited {timeout:g} s)") from None
                    time.sleep(0.05)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.flush()
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "DirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunLock(DirLock):
    """One writer per run directory: a second `vlmocr run` on the same --out fails clearly."""

    kind = "run"
    busy = "run directory {dir} is in use by {holder}"


# ------------------------------------------------------------------------------ atomic files
#
# The only atomic writers: each file is written under a hidden sibling `.<name>.<pid>.tmp` and
# renamed over its name, so a reader (or a kill) never meets half a file.


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """The temporary sibling to write `path` through (a PIL save, a CSV stream, a symlink): it is
    renamed over `path` when the block ends, and removed when the block raises."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a leftover of a killed writer with our pid (a symlink refuses to overwrite)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, errors: str = "strict") -> None:
    """``errors="surrogateescape"`` for a file of paths (a manifest): a file name that is not UTF-8
    is written as the bytes it is, and read back the same way (sources.from_manifest)."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8", errors=errors)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# ------------------------------------------------------------------------------ output folders
#
# export, merge and report replace what they wrote before, and nothing else: the folder they
# write must be new, empty, or one they made (OUTPUT_MARKER inside names the command). A build
# goes into a hidden sibling `.<name>.<pid>.tmp` whose marker is flock'ed while it is written,
# so the next build into the same place can tell a killed build's leftovers from a live one's.

OUTPUT_MARKER = ".vlmocr-output"
KILL_AT_ENV = "VLMOCR_KILL_AT"


def kill_point(name: str) -> None:
    """Fault injection for tests: SIGKILL this very process at the named moment
    (VLMOCR_KILL_AT=name), to prove what a real crash there leaves behind and how it is repaired."""
    if os.environ.get(KILL_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _output_kind(folder: Path) -> str | None:
    try:
        return (folder / OUTPUT_MARKER).read_text(encoding="utf-8").split("\n", 1)[0].strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _is_empty_dir(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def check_output_dir(out: Path, kind: str, legacy: Callable[[Path], bool] | None = None) -> None:
    """Refuse (exit 3) an `out` that `kind` may not replace: anything but a new or empty folder
    or one `kind` made itself (its marker; `legacy` recognises one made before markers)."""
    out = Path(out)
    if out.is_symlink():
        raise UsageError(f"--out {out} is a symbolic link; give a new or empty folder")
    check_output_path(out, "--out", folder=True)  # a file there, a parent that is a file, no permission
    if not out.exists():
        return
    made = _output_kind(out)
    if made == kind or (made is None and (_is_empty_dir(out) or (legacy is not None and legacy(out)))):
        return
    why = f"it was made by vlmocr {made}" if made else f"vlmocr {kind} did not make it (no {OUTPUT_MARKER})"
    raise UsageError(f"--out {out}: not replacing a folder that is not empty and {why}; give a new or empty folder")


def _hold_marker(folder: Path, kind: str) -> int:
    """Write `kind` into the folder's marker and keep it flock'ed (the caller closes the fd)."""
    fd = os.open(folder / OUTPUT_MARKER, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{kind}\n".encode())
    return fd


def remove_abandoned(out: Path) -> list[str]:
    """Remove the hidden siblings (`.<name>.<pid>.tmp|old`) that builds into `out` killed
    mid-way left; a sibling whose marker a live build holds, or that is not ours, stays."""
    out = Path(os.path.abspath(out))
    pattern = re.compile(rf"\.{re.escape(out.name)}\.\d+\.(?:tmp|old)")
    removed: list[str] = []
    try:
        entries = [e for e in os.scandir(out.parent) if pattern.fullmatch(e.name)]
    except OSError:
        return removed
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            if _is_empty_dir(path):  # killed between mkdir and its marker
                path.rmdir()
                removed.append(entry.name)
                continue
            fd = os.open(path / OUTPUT_MARKER, os.O_RDONLY)
        except OSError:
            continue  # no marker: not a folder we made
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a build at work
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(entry.name)
        finally:
            os.close(fd)
    return removed


class OutputBuild:
    """Build the folder `out` beside it and swap it in whole (`replace_dir`): readers see the
    old tree or the new one, and a killed build leaves only a hidden sibling that the next build
    into `out` removes (`remove_abandoned`). Refuses an `out` it may not replace at once, before
    any work (`check_output_dir`)."""

    def __init__(self, out: Path, kind: str, legacy: Callable[[Path], bool] | None = None) -> None:
        self.out = Path(os.path.abspath(out))
        self.kind = kind
        self.legacy = legacy
        self.path = self.out.with_name(f".{self.out.name}.{os.getpid()}.tmp")
        self._fd = -1
        self._done = False

    def check(self) -> None:
        check_output_dir(self.out, self.kind, self.legacy)

    def __enter__(self) -> "OutputBuild":
        self.check()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned(self.out)
        self.path.mkdir()
        self._fd = _hold_marker(self.path, self.kind)
        return self

    def commit(self) -> None:
        replace_dir(self.path, self.out, self.kind, self.legacy)
        self._done = True

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            shutil.rmtree(self.path, ignore_errors=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_RENAME_EXCHANGE = 2
_libc: Any = None


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2); False when the system cannot."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            _libc.renameat2  # noqa: B018 (probe)
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    at_fdcwd = -100
    rc = _libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the filesystem cannot exchange
            return False
        raise OSError(err, os.strerror(err), str(a))
    return True


def replace_dir(tmp: Path, out: Path, kind: str, legacy: Callable[[Path], bool] | None = None) -> None:
    """Move the finished folder `tmp` to `out` — only a new or empty `out`, or one `kind` made
    (`check_output_dir`, checked again here: a build takes a while). An older `out` is swapped
    with the new one in one step where the filesystem can, then removed, so readers see the old
    or the new tree, never a mixture."""
    check_output_dir(out, kind, legacy)
    if _output_kind(tmp) != kind:
        (tmp / OUTPUT_MARKER).write_text(f"{kind}\n", encoding="utf-8")
    if not out.exists():
        os.replace(tmp, out)
        return
    if _output_kind(out) != kind:  # empty, or made before markers: marked, so a leftover of it is ours too
        (out / OUTPUT_MARKER).write_text(f"{kind}\n", encoding="utf-8")
    if exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)  # now the old tree
    else:
        old = out.with_name(f".{out.name}.{os.getpid()}.old")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)


def file_sha256(path: Path) -> str:
    """The file's sha256. Anything but a regular file (a FIFO, a device) raises OSError instead
    of blocking on open or reading forever; O_NONBLOCK changes nothing for a regular file."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

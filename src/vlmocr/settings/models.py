"""Model snapshots pinned to a commit: fetch from a Hugging Face Hub, record, verify, check.

`fetch_model` downloads a model repository at one commit into a directory with
``huggingface_hub.snapshot_download`` and writes ``DIR/.vlmocr-model.json``: the repo, the revision
asked for, the commit the Hub resolved it to, when, and a manifest of every file in the directory
(path, bytes, sha256). Compute nodes have no internet and a login node is no place for a
download: fetch in a CPU job (`vlmocr slurm fetch`, vlmocr.cluster.slurm.fetch_job) or wherever the Hub
is reachable, serve from the directory with ``vlmocr serve PROFILE --model-path DIR --revision COMMIT``.

A pin is a 40-hex commit: a branch name ("main") moves, so it is refused unless ``allow_branch``,
in which case it is resolved once and the commit recorded. Before the manifest is written, every
downloaded file is checked against the Hub's own listing at that commit (the sha256 of an LFS file,
the git blob id of any other), so a file changed locally since an earlier fetch — which
huggingface_hub skips because its metadata says "already downloaded" — is downloaded again rather
than recorded as the truth.

`verify_model_dir` re-hashes a directory against its manifest (missing, changed, extra files);
`check_model_dir` is the cheap check a server start makes: the manifest exists, names the commit
asked for, and every listed file is present with its recorded size.

huggingface_hub is imported only inside the functions that talk to a Hub.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..exceptions import EndpointUnavailable, ExitCode, UsageError, VlmocrError
from ..runfolder.record import JsonObject

MANIFEST_NAME = ".vlmocr-model.json"
MANIFEST_SCHEMA = 1
HF_CACHE_SUBDIR = (".cache", "huggingface")  # huggingface_hub's local_dir bookkeeping; not model files
DEFAULT_ENDPOINT = "https://huggingface.co"
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
REPO_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_CHUNK = 1 << 20


class ModelDirChanged(VlmocrError):
    """A model directory differs from its manifest or from the Hub (exit 1: fetch again)."""

    exit_code = ExitCode.incomplete


# --------------------------------------------------------------------------------------------
# the manifest
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative, '/'-separated
    bytes: int
    sha256: str


@dataclass
class ModelManifest:
    repo: str
    revision: str  # as asked for (a commit, or a branch/tag with allow_branch)
    commit: str  # what the Hub resolved it to: the pin
    fetched_at: str
    files: list[FileEntry]
    endpoint: str = DEFAULT_ENDPOINT
    include: list[str] | None = None
    hub_verified: int = 0  # files whose bytes matched the Hub's listing (LFS sha256 or git blob id)
    huggingface_hub: str | None = None
    schema: int = MANIFEST_SCHEMA

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def as_dict(self) -> JsonObject:
        data = asdict(self)
        data["file_count"] = len(self.files)
        data["total_bytes"] = self.total_bytes
        order = ["schema", "repo", "revision", "commit", "endpoint", "include", "fetched_at", "huggingface_hub",
                 "hub_verified", "file_count", "total_bytes", "files"]
        return {k: data[k] for k in order}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelManifest:
        files = [FileEntry(path=str(f["path"]), bytes=int(f["bytes"]), sha256=str(f["sha256"]))
                 for f in data["files"]]
        return cls(repo=str(data["repo"]), revision=str(data["revision"]), commit=str(data["commit"]),
                   fetched_at=str(data["fetched_at"]), files=files, endpoint=str(data.get("endpoint") or ""),
                   include=list(data["include"]) if data.get("include") else None,
                   hub_verified=int(data.get("hub_verified") or 0), huggingface_hub=data.get("huggingface_hub"),
                   schema=int(data.get("schema", MANIFEST_SCHEMA)))


def manifest_path(model_dir: str | os.PathLike[str]) -> Path:
    return Path(model_dir) / MANIFEST_NAME


def read_manifest(model_dir: str | os.PathLike[str]) -> ModelManifest:
    """The manifest of ``model_dir``; UsageError when there is none or it cannot be read."""
    d = Path(model_dir)
    if not d.is_dir():
        raise UsageError(f"{d} is not a directory")
    path = d / MANIFEST_NAME
    if not path.is_file():
        raise UsageError(f"{d} has no {MANIFEST_NAME}: it was not written by `vlmocr models fetch`, so its revision "
                         f"is unknown (fetch it with `vlmocr models fetch REPO --revision COMMIT --to {d}`)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        manifest = ModelManifest.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} cannot be read ({exc}); fetch the model again") from exc
    if manifest.schema > MANIFEST_SCHEMA:
        raise UsageError(f"{path} has schema {manifest.schema}; this vlmocr reads up to {MANIFEST_SCHEMA}")
    return manifest


def write_manifest(model_dir: str | os.PathLike[str], manifest: ModelManifest) -> Path:
    path = manifest_path(model_dir)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest.as_dict(), fh, indent=2, ensure_ascii=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------------------
# hashing and walking
# --------------------------------------------------------------------------------------------


def _excluded(rel_parts: Sequence[str]) -> bool:
    if len(rel_parts) == 1 and rel_parts[0] in (MANIFEST_NAME, MANIFEST_NAME + ".tmp"):
        return True
    return tuple(rel_parts[: len(HF_CACHE_SUBDIR)]) == HF_CACHE_SUBDIR


def list_files(model_dir: str | os.PathLike[str]) -> list[str]:
    """Every file under ``model_dir`` as a sorted '/'-separated relative path, without the manifest
    and huggingface_hub's ``.cache/huggingface`` bookkeeping. Symlinks to files count as files."""
    root = Path(model_dir)
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).parts
        if _excluded(rel_dir):
            dirnames[:] = []
            continue
        dirnames.sort()
        for name in filenames:
            parts = (*rel_dir, name)
            if _excluded(parts):
                continue
            full = Path(dirpath, name)
            if full.is_file():
                out.append("/".join(parts))
    return sorted(out)


def hash_file(path: str | os.PathLike[str], git_blob: bool = False) -> tuple[int, str, str | None]:
    """(bytes, sha256 hex, git blob sha1 hex or None) of a file, in one pass."""
    size = os.path.getsize(path)
    sha = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode()) if git_blob else None
    n = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
            if blob is not None:
                blob.update(chunk)
            n += len(chunk)
    return n, sha.hexdigest(), (blob.hexdigest() if blob is not None else None)


def scan_dir(model_dir: str | os.PathLike[str]) -> list[FileEntry]:
    root = Path(model_dir)
    entries = []
    for rel in list_files(root):
        size, sha, _ = hash_file(root / rel)
        entries.append(FileEntry(path=rel, bytes=size, sha256=sha))
    return entries


# --------------------------------------------------------------------------------------------
# fetch
# --------------------------------------------------------------------------------------------


def is_commit(revision: str) -> bool:
    return bool(COMMIT_RE.fullmatch(revision))


def default_endpoint(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class _HubFile:
    size: int
    blob_id: str | None
    lfs_sha256: str | None
    xet_only: bool


def _hub_check(local: Path, hub: _HubFile) -> tuple[bool | None, int, str]:
    """Hash ``local``; (matches the Hub? None when the Hub gave no usable hash, bytes, sha256)."""
    want_blob = hub.lfs_sha256 is None and hub.blob_id is not None and not hub.xet_only
    size, sha, blob = hash_file(local, git_blob=want_blob)
    if hub.lfs_sha256 is not None:
        return size == hub.size and sha == hub.lfs_sha256.lower(), size, sha
    if want_blob:
        return size == hub.size and blob == (hub.blob_id or "").lower(), size, sha
    return None, size, sha


def _translate_hub_error(exc: BaseException, repo: str, revision: str, endpoint: str) -> VlmocrError | None:
    from huggingface_hub.utils import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, RevisionNotFoundError):
        return UsageError(f"{repo} has no revision {revision!r} at {endpoint}")
    if isinstance(exc, GatedRepoError):
        return UsageError(f"{repo} is gated at {endpoint}: accept its terms on the Hub and set HF_TOKEN")
    if isinstance(exc, RepositoryNotFoundError):
        return UsageError(f"{repo} was not found at {endpoint} (or is private: set HF_TOKEN)")
    if isinstance(exc, OfflineModeIsEnabled):
        return UsageError("HF_HUB_OFFLINE is set: fetching needs the network (run it where the Hub is reachable "
                          "with HF_HUB_OFFLINE=0)")
    if isinstance(exc, HfHubHTTPError):
        return EndpointUnavailable(f"{endpoint} answered an error for {repo}@{revision}: {exc}")
    if isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__module__.split(".")[0] in (
            "httpx", "httpx2", "httpcore", "requests", "urllib3"):
        return EndpointUnavailable(f"cannot reach {endpoint} for {repo}@{revision}: {type(exc).__name__}: {exc}")
    if isinstance(exc, OSError):  # the local side: disk full, permissions; a rerun resumes the download
        return VlmocrError(f"fetching {repo}@{revision} failed: {type(exc).__name__}: {exc}", ExitCode.incomplete)
    return None


def _check_destination(dest: Path, repo: str) -> ModelManifest | None:
    """Refuse a directory that holds something other than (a fetch of) this repo."""
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--to {dest}: exists and is not a directory")
    if not dest.is_dir():
        return None
    if (dest / MANIFEST_NAME).is_file():
        old = read_manifest(dest)
        if old.repo != repo:
            raise UsageError(f"{dest} holds {old.repo}@{old.commit}, not {repo}: fetch into a new directory")
        return old
    if list_files(dest) and not (dest.joinpath(*HF_CACHE_SUBDIR)).is_dir():
        raise UsageError(f"{dest} is not empty and was not written by `vlmocr models fetch`: "
                         "fetch into a new or empty directory")
    return None


@dataclass
class FetchRequest:
    """A fetch's arguments, checked and normalised; ``existing``: the manifest ``dest`` already holds."""

    repo: str
    revision: str  # a lower-case 40-hex commit, or (allow_branch) a branch or tag
    endpoint: str
    dest: Path  # absolute
    existing: ModelManifest | None


def check_fetch_request(repo: str, revision: str, dest: str | os.PathLike[str], *, endpoint: str | None = None,
                        allow_branch: bool = False) -> FetchRequest:
    """Check a fetch without touching the network: the repo id, the pin (a 40-hex commit unless
    ``allow_branch``), the endpoint URL and the destination (new, empty, or an earlier fetch of
    this repo — at this commit, when the pin is one). `vlmocr slurm fetch` calls it on the login
    node, so a bad request fails there rather than in the queue. Raises UsageError."""
    repo = repo.strip()
    if not REPO_ID_RE.fullmatch(repo) or ".." in repo:
        raise UsageError(f"{repo!r} is not a repo id (ORG/NAME)")
    rev = revision.strip()
    if is_commit(rev.lower()):
        rev = rev.lower()
    elif not allow_branch:
        raise UsageError(f"--revision {revision!r} is not a commit: a pin must be a full 40-hex commit sha (a branch "
                         "or tag can move). Look it up on the repo's 'Files and versions' page, or pass --allow-branch "
                         "to resolve it now and record the commit it points to")
    if not rev:
        raise UsageError("--revision is empty")
    ep = (endpoint or default_endpoint()).rstrip("/")
    if not re.match(r"https?://", ep):
        raise UsageError(f"--endpoint {ep!r}: give an http(s) URL")
    dest_path = Path(dest).expanduser().absolute()
    old = _check_destination(dest_path, repo)
    if old is not None and is_commit(rev) and old.commit != rev:
        raise UsageError(f"{dest_path} holds {repo}@{old.commit}, not {rev}: fetch into a new directory "
                         "(one directory, one commit)")
    return FetchRequest(repo=repo, revision=rev, endpoint=ep, dest=dest_path, existing=old)


def fetch_model(
    repo: str,
    revision: str,
    dest: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    include: Sequence[str] | None = None,
    allow_branch: bool = False,
    token: str | bool | None = None,
    max_workers: int = 8,
    say: Callable[[str], None] | None = None,
) -> ModelManifest:
    """Download ``repo`` at ``revision`` into ``dest`` and write its manifest; return it.

    ``revision`` must be a 40-hex commit unless ``allow_branch`` (then it is resolved once and the
    download pinned to the commit the Hub returned). ``include``: glob patterns of files to fetch
    (default all). Raises UsageError for a bad pin, repo or destination, EndpointUnavailable when
    the Hub cannot be reached, ModelDirChanged (exit 1) when a file still differs from the Hub's
    listing after it was downloaded again."""
    note = say or (lambda _m: None)
    req = check_fetch_request(repo, revision, dest, endpoint=endpoint, allow_branch=allow_branch)
    repo, rev, ep, dest_path, old = req.repo, req.revision, req.endpoint, req.dest, req.existing

    import huggingface_hub
    from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download

    if getattr(constants, "HF_HUB_OFFLINE", False):
        raise UsageError("HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set: fetching needs the network; run "
                         "`vlmocr models fetch` where the Hub is reachable, with HF_HUB_OFFLINE=0")
    api = HfApi(endpoint=ep, token=token, library_name="vlmocr")
    try:
        info = api.model_info(repo, revision=rev)
        commit = (info.sha or "").lower()
        if not is_commit(commit):
            raise EndpointUnavailable(f"{ep} resolved {repo}@{rev} to {info.sha!r}, which is not a commit")
        if is_commit(rev) and commit != rev:
            raise UsageError(f"{ep} resolved {repo}@{rev} to another commit, {commit}: not pinning to it")
        if old is not None and old.commit != commit:
            raise UsageError(f"{dest_path} holds {repo}@{old.commit}, not {commit}: fetch into a new directory "
                             "(one directory, one commit)")
        note(f"{repo}@{rev} is commit {commit}" if rev != commit else f"{repo}@{commit}")
        listing: dict[str, _HubFile] = {}
        for item in api.list_repo_tree(repo, recursive=True, revision=commit):
            if not hasattr(item, "size") or not hasattr(item, "blob_id"):
                continue  # a folder
            lfs = getattr(item, "lfs", None)
            lfs_sha = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
            listing[item.path] = _HubFile(size=int(item.size), blob_id=getattr(item, "blob_id", None),
                                          lfs_sha256=lfs_sha,
                                          xet_only=bool(getattr(item, "xet_hash", None)) and lfs_sha is None)
        dest_path.mkdir(parents=True, exist_ok=True)
        patterns = list(include) if include else None
        snapshot_download(repo, revision=commit, local_dir=str(dest_path), endpoint=ep, token=token,
                          allow_patterns=patterns, max_workers=max_workers, library_name="vlmocr")
        wanted = _filter(listing, patterns)
        verified, bad = _compare_with_hub(dest_path, listing, wanted)
        if bad:
            note(f"{len(bad)} file(s) differ from the Hub's listing; downloading them again: {', '.join(bad[:5])}")
            for rel in bad:
                hf_hub_download(repo, rel, revision=commit, local_dir=str(dest_path), endpoint=ep, token=token,
                                force_download=True, library_name="vlmocr")
            verified, bad = _compare_with_hub(dest_path, listing, wanted)
            if bad:
                raise ModelDirChanged(f"{len(bad)} file(s) of {repo}@{commit} in {dest_path} do not match the Hub's "
                                      f"listing even after downloading them again: {', '.join(bad[:10])}")
    except VlmocrError:
        raise
    except Exception as exc:  # translate the Hub's errors into ours; anything else is a bug
        translated = _translate_hub_error(exc, repo, rev, ep)
        if translated is None:
            raise
        raise translated from exc

    manifest = ModelManifest(repo=repo, revision=rev, commit=commit, fetched_at=_utc_now(), files=scan_dir(dest_path),
                             endpoint=ep, include=patterns, hub_verified=verified,
                             huggingface_hub=getattr(huggingface_hub, "__version__", None))
    write_manifest(dest_path, manifest)
    return manifest


def _filter(listing: Mapping[str, _HubFile], patterns: Sequence[str] | None) -> list[str]:
    if not patterns:
        return sorted(listing)
    from huggingface_hub.utils import filter_repo_objects

    return sorted(filter_repo_objects(items=list(listing), allow_patterns=list(patterns)))


def _compare_with_hub(dest: Path, listing: Mapping[str, _HubFile], wanted: Iterable[str]) -> tuple[int, list[str]]:
    """(files that match the Hub, files that are missing or differ)."""
    verified, bad = 0, []
    for rel in wanted:
        local = dest.joinpath(*rel.split("/"))
        if not local.is_file():
            bad.append(rel)
            continue
        ok, _, _ = _hub_check(local, listing[rel])
        if ok is False:
            bad.append(rel)
        elif ok:
            verified += 1
    return verified, bad


# --------------------------------------------------------------------------------------------
# status, verify, check
# --------------------------------------------------------------------------------------------


@dataclass
class Verification:
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.extra)

    def as_dict(self) -> JsonObject:
        return {"ok": self.ok, "checked": self.checked, "missing": self.missing, "changed": self.changed,
                "extra": self.extra}


def verify_model_dir(model_dir: str | os.PathLike[str], manifest: ModelManifest | None = None) -> Verification:
    """Re-hash every file of ``model_dir`` against its manifest."""
    root = Path(model_dir)
    man = manifest or read_manifest(root)
    on_disk = set(list_files(root))
    result = Verification()
    for entry in man.files:
        if entry.path not in on_disk:
            result.missing.append(entry.path)
            continue
        result.checked += 1
        local = root.joinpath(*entry.path.split("/"))
        if os.path.getsize(local) != entry.bytes:  # no need to read it
            result.changed.append(entry.path)
            continue
        _, sha, _ = hash_file(local)
        if sha != entry.sha256:
            result.changed.append(entry.path)
    listed = {e.path for e in man.files}
    result.extra = sorted(on_disk - listed)
    return result


def model_status(model_dir: str | os.PathLike[str], verify: bool = False) -> dict[str, Any]:
    """What `vlmocr models status` prints: the manifest's facts, and with ``verify`` the differences."""
    man = read_manifest(model_dir)
    status: dict[str, Any] = {
        "dir": str(Path(model_dir)), "repo": man.repo, "revision": man.revision, "commit": man.commit,
        "endpoint": man.endpoint, "fetched_at": man.fetched_at, "file_count": len(man.files),
        "total_bytes": man.total_bytes, "include": man.include, "hub_verified": man.hub_verified,
    }
    if verify:
        status["verify"] = verify_model_dir(model_dir, man).as_dict()
    return status


def check_model_dir(path: str | os.PathLike[str], revision: str | None) -> None:
    """Refuse to serve ``path`` unless it is a fetched snapshot of ``revision``.

    The manifest must exist, its resolved commit must equal ``revision`` (when given; compared
    case-insensitively) and every file it lists must be present with its recorded size (a stat,
    no hashing: `vlmocr models status DIR --verify` re-hashes). Raises UsageError naming both the
    directory's commit and the one asked for."""
    d = Path(path)
    man = read_manifest(d)
    if revision is not None and revision.strip().lower() != man.commit.lower():
        asked = revision.strip()
        hint = (" (a branch or tag: pass the commit)" if not is_commit(asked.lower()) else "")
        raise UsageError(f"{d} holds {man.repo} at commit {man.commit}, but revision {asked!r} was asked for{hint}; "
                         f"serve with --revision {man.commit}, or fetch {asked} into another directory")
    missing, resized = [], []
    for entry in man.files:
        local = d.joinpath(*entry.path.split("/"))
        try:
            size = os.path.getsize(local)
        except OSError:
            missing.append(entry.path)
            continue
        if size != entry.bytes:
            resized.append(entry.path)
    if missing or resized:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing ({', '.join(missing[:5])})")
        if resized:
            parts.append(f"{len(resized)} changed in size ({', '.join(resized[:5])})")
        raise UsageError(f"{d} ({man.repo}@{man.commit}) does not match its manifest: {'; '.join(parts)}; "
                         f"see `vlmocr models status {d} --verify`, or fetch it again")


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover

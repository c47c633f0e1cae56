"""A stand-in Hugging Face Hub on 127.0.0.1: what ``huggingface_hub``'s ``model_info``,
``list_repo_tree``, ``snapshot_download`` and ``hf_hub_download`` call for one model repo, so that
`vlmocr models fetch` (and `vlmocr slurm fetch`, whose job runs it on a node of the same machine)
is tested over real HTTP through the real client (pass ``--endpoint hub.url``).

Routes (as the Hub sends them):

* ``GET /api/models/{repo}/revision/{rev}`` — repo info: ``sha`` (the commit), ``siblings``;
* ``GET /api/models/{repo}/tree/{rev}?recursive=…`` — the file listing (size, git blob ``oid``,
  ``lfs`` {oid = sha256, size} for the weights);
* ``HEAD|GET /{repo}/resolve/{rev}/{path}`` — the file, with ``X-Repo-Commit``, ``ETag``
  (``X-Linked-Etag``/``X-Linked-Size`` for LFS files) and ``Content-Length``.

``FakeHub.requests`` logs every request; ``corrupt`` serves other bytes for a path than the
listing promises. ``serve_hub_in_thread`` runs it for a ``with`` block; ``standard_hub()`` holds
the repo ``REPO_ID`` at two commits (``SHA_MAIN``, the branch "main"; ``SHA_OLD``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web

from .app_thread import serve_app_in_thread

REPO_ID = "acme/tiny-ocr"
SHA_MAIN = "3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c1e3b5d7f90"
SHA_OLD = "0123456789abcdef0123456789abcdef01234567"
SHA_UNKNOWN = "ffffffffffffffffffffffffffffffffffffffff"


def _weights(seed: int, n: int = 96_000) -> bytes:
    return random.Random(seed).randbytes(n)


FILES_MAIN: dict[str, bytes] = {
    ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
    "config.json": json.dumps({"architectures": ["TinyOCR"], "hidden_size": 8}).encode(),
    "model.safetensors": _weights(1),
    "tokenizer.json": json.dumps({"version": "1.0", "model": {"vocab": {"a": 0, "b": 1}}}).encode(),
    "tokenizer_config.json": b'{"model_max_length": 512}',
    "processor/preprocessor_config.json": b'{"size": {"longest_edge": 1540}}',
}
FILES_OLD: dict[str, bytes] = {
    "config.json": json.dumps({"architectures": ["TinyOCR"], "hidden_size": 4}).encode(),
    "model.safetensors": _weights(2),
}
LFS_SUFFIXES = (".safetensors",)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FakeHub:
    commits: dict[str, dict[str, bytes]]
    refs: dict[str, str]
    repo: str = REPO_ID
    corrupt: dict[str, bytes] = field(default_factory=dict)  # path -> bytes served instead of the listed ones
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""

    def _commit(self, rev: str) -> str | None:
        if rev in self.commits:
            return rev
        return self.refs.get(rev)

    @staticmethod
    def _error(status: int, code: str, message: str) -> web.Response:
        return web.json_response({"error": message}, status=status, headers={"X-Error-Code": code,
                                                                               "X-Error-Message": message})

    def _repo_of(self, request: web.Request) -> str | None:
        repo = f"{request.match_info['owner']}/{request.match_info['name']}"
        return repo if repo == self.repo else None

    async def _log(self, request: web.Request) -> None:
        self.requests.append((request.method, request.path_qs))

    async def _revision(self, request: web.Request) -> str | web.Response:
        """The commit a request's repo and revision name, or the Hub's 404 for either."""
        await self._log(request)
        if self._repo_of(request) is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        commit = self._commit(request.match_info["rev"])
        if commit is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {request.match_info['rev']}")
        return commit

    async def info(self, request: web.Request) -> web.Response:
        commit = await self._revision(request)
        if isinstance(commit, web.Response):
            return commit
        files = self.commits[commit]
        return web.json_response({"_id": "x", "id": self.repo, "modelId": self.repo, "sha": commit, "private": False,
                                  "gated": False, "disabled": False, "tags": [],
                                  "siblings": [{"rfilename": p} for p in sorted(files)]})

    async def tree(self, request: web.Request) -> web.Response:
        commit = await self._revision(request)
        if isinstance(commit, web.Response):
            return commit
        prefix = request.match_info.get("path", "").strip("/")
        recursive = request.query.get("recursive", "").lower() in ("true", "1")
        entries, folders = [], set()
        for path, data in sorted(self.commits[commit].items()):
            if prefix and not path.startswith(prefix + "/"):
                continue
            rest = path[len(prefix) + 1:] if prefix else path
            if "/" in rest:
                folder = (prefix + "/" if prefix else "") + rest.split("/")[0]
                if folder not in folders:
                    folders.add(folder)
                    entries.append({"type": "directory", "oid": git_blob_id(folder.encode()), "size": 0,
                                    "path": folder})
                if not recursive:
                    continue
            entry = {"type": "file", "oid": git_blob_id(data if not path.endswith(LFS_SUFFIXES) else
                                                        b"version https://git-lfs.github.com/spec/v1\n"),
                     "size": len(data), "path": path}
            if path.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": sha256(data), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        return web.json_response(entries)

    async def resolve(self, request: web.Request) -> web.StreamResponse:
        commit = await self._revision(request)
        if isinstance(commit, web.Response):
            return commit
        path = request.match_info["path"]
        files = self.commits[commit]
        if path not in files:
            return self._error(404, "EntryNotFound", f"{path} does not exist at {commit}")
        data = files[path]
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if path.endswith(LFS_SUFFIXES):
            headers.update({"ETag": f'"{git_blob_id(data)}"', "X-Linked-Etag": f'"{sha256(data)}"',
                            "X-Linked-Size": str(len(data))})
        else:
            headers["ETag"] = f'"{git_blob_id(data)}"'
        body = self.corrupt.get(path, data)
        headers["Content-Length"] = str(len(body))
        if request.method == "HEAD":
            response = web.StreamResponse(status=200, headers=headers)
            await response.prepare(request)
            await response.write_eof()
            return response
        return web.Response(body=body, headers=headers)

    async def fallback(self, request: web.Request) -> web.Response:
        await self._log(request)
        return self._error(404, "EntryNotFound", f"the stand-in Hub does not serve {request.path}")

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/api/models/{owner}/{name}/revision/{rev}", self.info)
        r.add_get("/api/models/{owner}/{name}/tree/{rev}", self.tree)
        r.add_get("/api/models/{owner}/{name}/tree/{rev}/{path:.*}", self.tree)
        r.add_route("HEAD", "/{owner}/{name}/resolve/{rev}/{path:.+}", self.resolve)
        r.add_route("GET", "/{owner}/{name}/resolve/{rev}/{path:.+}", self.resolve)
        r.add_route("*", "/{tail:.*}", self.fallback)
        return app


def standard_hub() -> FakeHub:
    """``REPO_ID`` at ``SHA_MAIN`` (also the branch "main") and at ``SHA_OLD``."""
    return FakeHub(commits={SHA_MAIN: dict(FILES_MAIN), SHA_OLD: dict(FILES_OLD)}, refs={"main": SHA_MAIN})


@contextlib.contextmanager
def serve_hub_in_thread(hub: FakeHub | None = None) -> Iterator[FakeHub]:
    """Serve ``hub`` (default ``standard_hub()``) on 127.0.0.1 from a thread of this process for
    the ``with`` block; ``hub.url`` is its base URL."""
    state = hub if hub is not None else standard_hub()
    with serve_app_in_thread(state.app(), "the stand-in Hub", start_timeout=10) as url:
        state.url = url
        yield state

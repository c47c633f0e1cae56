#!/usr/bin/env python3
"""Check every profile's serving recipe against the released vLLM and SGLang code (issue 25).

For each server version (default: the ones src/vlmocr/profiles/releases_checked.json names) the
released wheel is fetched with `pip download --no-deps` (a zip; cached in --cache) and read, not
imported (no GPU, no torch needed):

* options: every flag `vlmocr serve` writes for the profile (its args, the version part chosen,
  the args file's keys, the tensor-parallel and no-P2P flags) must be defined by that version's
  argument parser, by its exact name (argparse's abbreviations do not count: `--tp` is not
  `--tp-size`);
* logits processors: each `--logits-processors module:Class` must exist in that version, and a
  V1-interface class needs the V1 model runner where the V2 runner is the default
  (VLLM_USE_V2_MODEL_RUNNER=0, and a version that still has the V1 runner); SGLang's per-request
  `custom_logit_processor` class must exist;
* requests: every top-level field of the bodies the client sends (first pass, multi-page, each
  retry step) must be a field of that version's ChatCompletionRequest (others are dropped
  silently), and per-request `mm_processor_kwargs` need `--trust-request-mm-kwargs` where the
  version validates them.

It writes the result per profile x version and each profile's recipe digest to
releases_checked.json (tests fail when a profile changes without a new check) and, with
--docs, the table in docs/servers.md.

    python scripts/check_releases.py                    # the versions in releases_checked.json
    python scripts/check_releases.py --vllm 0.31.0 0.34.0 --sglang 0.5.23 --docs
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from vlmocr.cluster.serve.plan import plan_server
from vlmocr.cluster.serve.version import ServerVersion, ServerVersionRefused
from vlmocr.profiles import Profile, list_profiles
from vlmocr.profiles.releases import CHECKED_FILE, TABLE_END, TABLE_START, load_checked, recipe_digest, release_table
from vlmocr.reading.request import build_chat_request, ladder_overrides

REPO = Path(__file__).resolve().parent.parent
FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
V1_PROCESSOR_MODULES = ("vllm.v1.sample.logits_processor",)
MM_KWARGS = ("mm_processor_kwargs", "media_io_kwargs")


# --------------------------------------------------------------------------------------------
# Reading a released package
# --------------------------------------------------------------------------------------------


def fetch(dist: str, version: str, cache: Path) -> Path:
    """The package's Python files, extracted from its released wheel, under cache/dist-version/."""
    root = cache / f"{dist}-{version}"
    if (root / dist).is_dir():
        return root
    wheels = list(cache.glob(f"{dist}-{version}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"{dist}=={version}", "-d",
                        str(cache)], check=True)
        wheels = list(cache.glob(f"{dist}-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(root, [n for n in zf.namelist() if n.startswith(f"{dist}/") and n.endswith(".py")])
    return root


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return None


def _strings(nodes: list[ast.expr]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@dataclass
class Release:
    """What one released version defines, read from its source."""

    server: str
    version: str
    root: Path
    flags: set[str] = field(default_factory=set)
    bool_fields: set[str] = field(default_factory=set)
    request_fields: set[str] = field(default_factory=set)
    validates_mm_kwargs: bool = False
    v2_runner_default: bool = False
    v1_runner_available: bool = False

    def module_file(self, module: str) -> Path | None:
        base = self.root / module.replace(".", "/")
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    def find_class(self, module: str, name: str, hops: int = 3) -> tuple[ast.ClassDef, str] | None:
        """The class ``name`` as ``module`` has it (defined there or imported into it)."""
        path = self.module_file(module)
        tree = _parse(path) if path else None
        if tree is None:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node, module
        if hops:
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if (alias.asname or alias.name) == name:
                            src = _resolve(module, node, path)
                            return self.find_class(src, alias.name, hops - 1)
        return None

    def base_origin(self, module: str, cls: ast.ClassDef) -> list[str]:
        """Where each base class of ``cls`` is imported from (module names)."""
        path = self.module_file(module)
        tree = _parse(path) if path else None
        origins = []
        names = [b.id for b in cls.bases if isinstance(b, ast.Name)]
        for name in names:
            origin = module
            for node in ast.walk(tree) if tree else []:
                if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                    origin = _resolve(module, node, path)
            origins.append(f"{origin}:{name}")
        return origins


def _resolve(module: str, node: ast.ImportFrom, path: Path | None) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if path is None or path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _add_argument_flags(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            out |= {s for s in _strings(node.args) if FLAG.match(s)}
    return out


def _generated_field_flags(tree: ast.Module, source: str) -> set[str]:
    """Dataclass fields a module turns into flags (vLLM's FrontendArgs: f"--{key.replace('_', '-')}")."""
    if "replace('_', '-')" not in source and 'replace("_", "-")' not in source:
        return set()
    out = set()
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not item.target.id.startswith("_"):
                out.add("--" + item.target.id.replace("_", "-"))
    return out


def _sglang_field_flags(tree: ast.Module) -> set[str]:
    """SGLang >= 0.5.2x: fields annotated A[type, "help"] or A[type, Arg(cli_name=…, aliases=[…])]."""
    out = set()
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            ann = item.annotation
            if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated")):
                continue
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else []
            meta = elts[1] if len(elts) > 1 else None
            names = ["--" + item.target.id.replace("_", "-")]
            if isinstance(meta, ast.Call):
                kw = {k.arg: k.value for k in meta.keywords}
                if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                    continue
                if isinstance(kw.get("cli_name"), ast.Constant):
                    names = [kw["cli_name"].value]
                if isinstance(kw.get("aliases"), ast.List):
                    names += _strings(kw["aliases"].elts)
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                continue
            out |= set(names)
    return out


def _class_fields(release: Release, module: str, name: str, depth: int = 4) -> set[str]:
    found = release.find_class(module, name)
    if found is None:
        return set()
    cls, where = found
    names = {i.target.id for i in cls.body if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)}
    if depth:
        for origin in release.base_origin(where, cls):
            mod, _, base = origin.partition(":")
            if base not in ("BaseModel", "object"):
                names |= _class_fields(release, mod, base, depth - 1)
    return names


def read_release(server: str, version: str, cache: Path) -> Release:
    dist = {"vllm": "vllm", "sglang": "sglang"}[server]
    root = fetch(dist, version, cache)
    rel = Release(server, version, root)
    pkg = root / dist
    if server == "vllm":
        files = [*pkg.joinpath("engine").rglob("*.py"), *pkg.joinpath("entrypoints").rglob("*.py"),
                 *pkg.joinpath("utils").rglob("*argparse*.py")]
    else:
        files = [*pkg.joinpath("srt").glob("server_args*.py"), *pkg.joinpath("srt", "arg_groups").rglob("*.py")]
    for path in files:
        if "/tests/" in str(path):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        if "add_argument" not in source and "replace(" not in source and " A[" not in source:
            continue
        tree = _parse(path)
        if tree is None:
            continue
        rel.flags |= _add_argument_flags(tree)
        if server == "vllm":
            rel.flags |= _generated_field_flags(tree, source)
        else:
            rel.flags |= _sglang_field_flags(tree)
        if "--config" in source and "FlexibleArgumentParser" in source:
            rel.flags.add("--config")  # vLLM's FlexibleArgumentParser reads a YAML args file
    if server == "vllm":
        for path in [*pkg.joinpath("config").rglob("*.py"), pkg / "engine" / "arg_utils.py"]:
            tree = _parse(path)
            for node in ast.walk(tree) if tree else []:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and "bool" in ast.unparse(node.annotation):
                    rel.bool_fields.add(node.target.id)
        protocol = next((m for m in ("vllm.entrypoints.openai.chat_completion.protocol", "vllm.entrypoints.openai.protocol")
                         if rel.module_file(m)), "")
        rel.request_fields = _class_fields(rel, protocol, "ChatCompletionRequest")
        rel.validates_mm_kwargs = any("def validate_request_mm_kwargs" in p.read_text(errors="replace")
                                      for p in pkg.joinpath("entrypoints").rglob("protocol.py"))
        vllm_config = (pkg / "config" / "vllm.py").read_text(errors="replace")
        rel.v2_runner_default = "def use_v2_model_runner" in vllm_config
        rel.v1_runner_available = (pkg / "v1" / "worker" / "gpu_model_runner.py").is_file() and \
            "VLLM_USE_V2_MODEL_RUNNER" in (pkg / "envs.py").read_text(errors="replace")
    else:
        rel.request_fields = _class_fields(rel, "sglang.srt.entrypoints.openai.protocol", "ChatCompletionRequest")
    return rel


# --------------------------------------------------------------------------------------------
# Checking one profile on one release
# --------------------------------------------------------------------------------------------


def _flags_of(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("-") and FLAG.match(a.split("=", 1)[0])]


def _bodies(profile: Profile, kind: str) -> list[dict]:
    image = [(b"\x89PNG", "image/png")]
    bodies = [build_chat_request(profile, image, kind, "m")]
    if profile.multipage.max_pages > 1:
        bodies.append(build_chat_request(profile, image * 2, kind, "m"))
    step = 1
    while (over := ladder_overrides(profile, kind, step)) is not None:
        bodies.append(build_chat_request(profile, image, kind, "m", over))
        step += 1
    if profile.logprobs:
        for body in bodies:
            body.setdefault("logprobs", True)
    return bodies


def check(profile: Profile, rel: Release) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "CUDA_VISIBLE_DEVICES": "0,1",
           "VLMOCR_VLLM_BIN": "vllm", "VLMOCR_SGLANG_BIN": "python3 -m sglang.launch_server"}
    told = ServerVersion(rel.version, "checked")
    try:
        plan = plan_server(profile, rel.server, profile.model or "org/any-model", environ=env, write=False,
                           version=told, no_p2p=True)
    except ServerVersionRefused as exc:
        return {"result": "refused", "note": str(exc).split(": ", 1)[-1]}
    problems: list[str] = []
    emitted = _flags_of(plan.argv[plan.argv.index("--host"):])
    emitted += ["--" + key.lstrip("-") for key in json.loads(json.dumps(
        {**(profile.serve[rel.server].json_args if rel.server in profile.serve else {}),
         **(plan.recipe.part.json_args if plan.recipe and plan.recipe.part else {})}))]
    for flag in dict.fromkeys(emitted):
        if flag in rel.flags:
            continue
        if flag.startswith("--no-") and "--" + flag[5:] in rel.flags and flag[5:].replace("-", "_") in rel.bool_fields:
            continue
        problems.append(f"{rel.server} {rel.version} has no option {flag}")
    for i, arg in enumerate(plan.argv):
        if arg in ("--logits-processors", "--logits_processors"):
            for fqcn in plan.argv[i + 1].split(","):
                problems += _processor(rel, fqcn, plan.env)
    if rel.server == "sglang" and profile.sglang_logit_processor:
        module, _, name = profile.sglang_logit_processor.partition(":")
        if rel.find_class(module, name) is None:
            problems.append(f"sglang {rel.version} has no {profile.sglang_logit_processor}")
    for body in _bodies(profile, rel.server):
        for key in body:
            if rel.request_fields and key not in rel.request_fields:
                problems.append(f"request field {key!r} is not in {rel.server} {rel.version}'s ChatCompletionRequest "
                                "(dropped by the server)")
        if rel.validates_mm_kwargs and any(body.get(k) for k in MM_KWARGS) and "--trust-request-mm-kwargs" not in plan.argv:
            problems.append(f"per-request mm_processor_kwargs: {rel.server} {rel.version} answers 400 without "
                            "--trust-request-mm-kwargs")
    problems = list(dict.fromkeys(problems))
    if problems:
        return {"result": "fails", "note": "; ".join(problems)}
    note = ""
    if plan.recipe is not None and plan.recipe.part is not None:
        note = plan.recipe.loop_guard if "only" in plan.recipe.loop_guard else f"recipe {plan.recipe.part.versions}"
    return {"result": "works", "note": note}


def _processor(rel: Release, fqcn: str, env: dict[str, str]) -> list[str]:
    module, _, name = fqcn.partition(":")
    found = rel.find_class(module, name)
    if found is None:
        return [f"{rel.server} {rel.version} has no {fqcn} (the server dies at start)"]
    cls, where = found
    v1 = any(origin.startswith(V1_PROCESSOR_MODULES) or origin.endswith(":AdapterLogitsProcessor")
             for origin in rel.base_origin(where, cls))
    if v1 and rel.v2_runner_default:
        if not rel.v1_runner_available:
            return [f"{fqcn} is a V1-interface processor and {rel.server} {rel.version} has no V1 model runner"]
        if env.get("VLLM_USE_V2_MODEL_RUNNER") != "0":
            return [f"{fqcn} is a V1-interface processor: the V2 model runner, {rel.version}'s default, refuses it "
                    "(set VLLM_USE_V2_MODEL_RUNNER=0)"]
    return []


# --------------------------------------------------------------------------------------------


def main() -> int:
    previous = load_checked() if CHECKED_FILE.is_file() else {"versions": {}}
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", nargs="*", default=previous["versions"].get("vllm", ["0.31.0", "0.32.0", "0.33.0", "0.34.0"]))
    parser.add_argument("--sglang", nargs="*", default=previous["versions"].get("sglang", ["0.5.10.post1", "0.5.23"]))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/vlmocr-releases"))
    parser.add_argument("--docs", action="store_true", help="rewrite the table in docs/servers.md")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    versions = {"vllm": args.vllm, "sglang": args.sglang}
    releases = [read_release(server, v, args.cache) for server, vs in versions.items() for v in vs]
    for rel in releases:
        print(f"{rel.server} {rel.version}: {len(rel.flags)} options, {len(rel.request_fields)} request fields",
              file=sys.stderr)
    out = {"checked_on": dt.date.today().isoformat(), "versions": versions,
           "gpu_notes": previous.get("gpu_notes", {}), "profiles": {}}
    failed = 0
    for profile in list_profiles():
        results = {f"{rel.server} {rel.version}": check(profile, rel) for rel in releases}
        failed += sum(r["result"] == "fails" for r in results.values())
        out["profiles"][profile.name] = {"digest": recipe_digest(profile), "results": results}
        for key, res in results.items():
            if res["result"] != "works":
                print(f"{profile.name} on {key}: {res['result']}: {res['note']}", file=sys.stderr)
    CHECKED_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {CHECKED_FILE}: {len(out['profiles'])} profiles x {len(releases)} versions, {failed} failing",
          file=sys.stderr)
    if args.docs:
        page = REPO / "docs" / "servers.md"
        text = page.read_text(encoding="utf-8")
        start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
        page.write_text(text[:start] + "\n\n" + release_table(out) + "\n" + text[end:], encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

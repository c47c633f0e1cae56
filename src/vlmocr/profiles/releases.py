"""What the serving recipes were checked against: the released vLLM and SGLang code.

``scripts/check_releases.py`` downloads the released wheels of every server version named in
``releases_checked.json``, reads from their own source the options each version defines, the
logits processors it ships and the request fields it validates, and writes, per profile, the
digest of what the profile sends to a server and the result per server version. A profile whose
digest is not the checked one has changed since the check (tests/profiles/test_profile_releases.py fails
until the script is run again), and the table in docs/servers.md is made from the same file
(``release_table``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from . import Profile, list_profiles

CHECKED_FILE = Path(__file__).resolve().parent / "releases_checked.json"
TABLE_START = "<!-- releases table: python scripts/check_releases.py --docs -->"
TABLE_END = "<!-- end of releases table -->"


def recipe_material(profile: Profile) -> dict[str, Any]:
    """Everything of a profile that reaches a server: its start (flags, environment, JSON flags,
    version parts, attention backend, HF Jobs image) and its requests (extra body per server
    kind, multi-page and retry additions, the SGLang logit processor, logprobs)."""
    return {
        "model": profile.model,
        "serve": {kind: spec.model_dump(mode="json") for kind, spec in sorted(profile.serve.items())},
        "extra_body": profile.extra_body,
        "multipage_extra_body": profile.multipage.extra_body,
        "retry_extra_body": profile.retry.extra_body,
        "retry_sampling": profile.retry.sampling,
        "sampling": profile.sampling.model_dump(mode="json", exclude_none=True),
        "sglang_logit_processor": profile.sglang_logit_processor,
        "logprobs": profile.logprobs,
    }


def recipe_digest(profile: Profile) -> str:
    text = json.dumps(recipe_material(profile), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def load_checked(path: Path = CHECKED_FILE) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _cell(result: dict[str, Any]) -> str:
    word = {"works": "works", "refused": "refused", "fails": "FAILS"}[result["result"]]
    note = result.get("note") or ""
    return f"{word} ({note})" if note else word


def release_table(checked: dict[str, Any] | None = None) -> str:
    """The table in docs/servers.md: one row per profile and server, one column per checked version."""
    data = checked if checked is not None else load_checked()
    versions: dict[str, list[str]] = data["versions"]
    lines = []
    for server, vs in sorted(versions.items(), key=lambda kv: kv[0] != "vllm"):  # vLLM first
        lines.append(f"| profile | {server} " + " | ".join(vs) + " |")
        lines.append("|---" * (len(vs) + 1) + "|")
        for name, entry in sorted(data["profiles"].items()):
            cells = [_cell(entry["results"][f"{server} {v}"]) for v in vs]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    notes = data.get("gpu_notes") or {}
    if notes:
        lines.append("GPU generations:")
        lines.append("")
        lines += [f"- {name}: {text}" for name, text in sorted(notes.items())]
        lines.append("")
    lines.append(f"Checked {data['checked_on']} against the released wheels (`pip download --no-deps`): *works* "
                 "means every option `serve` writes, every logits processor it names and every request field the "
                 "client sends exist in that release as the recipe uses them; whether the release's model code "
                 "reads the model well needs a GPU and is not checked here. `python scripts/check_releases.py "
                 "--docs` checks again and rewrites this table.")
    return "\n".join(lines).rstrip() + "\n"


def stale_profiles(checked: dict[str, Any] | None = None) -> list[str]:
    """Profiles whose recipe is not the one checked (changed, new, or never checked)."""
    data = checked if checked is not None else load_checked()
    out = []
    for profile in list_profiles():
        entry = data["profiles"].get(profile.name)
        if entry is None or entry["digest"] != recipe_digest(profile):
            out.append(profile.name)
    return out

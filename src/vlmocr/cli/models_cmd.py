"""`vlmocr models fetch | status`: model snapshots pinned to a commit; the logic lives in vlmocr.settings.models.

Exit codes: 0 done / directory matches its manifest; 1 (`ExitCode.incomplete`) `status --verify`
found missing, changed or extra files, or a fetched file still differs from the Hub after a second
download (fetch again); 3 usage (a branch given as a pin, no manifest, wrong directory, unknown
repo or revision); 5 the Hub cannot be reached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..exceptions import ExitCode
from ..progress import console
from . import app, plain_typer

models_app = plain_typer(help="Model snapshots pinned to a commit: fetch from a Hugging Face Hub, verify.")
app.add_typer(models_app, name="models")


@models_app.command("fetch")
def fetch_command(
    repo: str = typer.Argument(..., help="Repo id on the Hub, e.g. allenai/olmOCR-2-7B-1025."),
    revision: str = typer.Option(..., "--revision", help="The commit to pin: a full 40-hex sha."),
    to: Path = typer.Option(..., "--to", help="Directory to download into (new, empty, or an earlier fetch of it)."),
    endpoint: Optional[str] = typer.Option(None, help="Hub URL (default: $HF_ENDPOINT or https://huggingface.co)."),
    include: List[str] = typer.Option(None, "--include", help="Only files matching this glob (repeatable)."),
    allow_branch: bool = typer.Option(False, "--allow-branch", help="Accept a branch or tag as --revision: resolve "
                                      "it now and record the commit it points to."),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest summary as JSON on stdout."),
) -> int:
    """Download REPO at a pinned commit into a directory and write its sha256 manifest."""
    from ..settings.models import MANIFEST_NAME, fetch_model, human_bytes

    man = fetch_model(repo, revision, to, endpoint=endpoint, include=list(include or []) or None,
                      allow_branch=allow_branch, say=lambda m: console.print(m, markup=False))
    if json_out:
        data = man.as_dict()
        data.pop("files")
        data["dir"] = str(to)
        print(json.dumps(data), flush=True)
    else:
        print(f"Fetched {man.repo}@{man.commit} into {to}: {len(man.files)} files, {human_bytes(man.total_bytes)} "
              f"({man.hub_verified} checked against the Hub); manifest {to / MANIFEST_NAME}", flush=True)
    return int(ExitCode.ok)


@models_app.command("status")
def status_command(
    model_dir: Path = typer.Argument(..., help="A directory written by `vlmocr models fetch`."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash every file; exit 1 when any is missing, "
                                "changed or extra."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable status on stdout."),
) -> int:
    """Repo, revision, file count and size of a fetched model; --verify re-hashes it."""
    from ..settings.models import human_bytes, model_status

    status = model_status(model_dir, verify=verify)
    check = status.get("verify")
    if json_out:
        print(json.dumps(status), flush=True)
    else:
        rev = status["revision"] if status["revision"] == status["commit"] else f"{status['revision']} → {status['commit']}"
        print(f"{status['repo']} @ {rev}", flush=True)
        print(f"  {status['file_count']} files, {human_bytes(status['total_bytes'])}, fetched {status['fetched_at']} "
              f"from {status['endpoint']}", flush=True)
        if check is not None:
            for kind in ("missing", "changed", "extra"):
                for path in check[kind]:
                    print(f"  {kind}: {path}", flush=True)
            if check["ok"]:
                print(f"  verified: all {check['checked']} files match the manifest", flush=True)
            else:
                print(f"  NOT verified: missing={len(check['missing'])} changed={len(check['changed'])} "
                      f"extra={len(check['extra'])}", flush=True)
    if check is not None and not check["ok"]:
        return int(ExitCode.incomplete)
    return int(ExitCode.ok)

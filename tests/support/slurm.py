"""Helpers of the `vlmocr slurm` tests: where the private test cluster is, the CLI in a subprocess,
coded corpora, executables written for a test, and the check that no hostile file name ran as a
command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from vlmocr.testing.pagecode import expected_text, make_coded_pdf

# The private cluster of scripts/slurm-up.sh; the same defaults as scripts/slurm-env.sh.
DEFAULT_DIR = "/tmp/vlmocr-slurm"
DEFAULT_PORT = 16817
SYSTEM_PORTS = (6817, 6818)


def cluster_dir() -> Path:
    """The private test cluster's directory: its slurm.conf, state, spool, logs, pid files."""
    return Path(os.environ.get("VLMOCR_SLURM_DIR") or DEFAULT_DIR)


def cluster_conf() -> Path:
    return cluster_dir() / "slurm.conf"


def cluster_ports() -> tuple[int, int]:
    """(SlurmctldPort, SlurmdPort) the private cluster listens on."""
    port = int(os.environ.get("VLMOCR_SLURM_PORT") or DEFAULT_PORT)
    return port, port + 1


def cluster_logs() -> list[Path]:
    return [cluster_dir() / "log" / "slurmctld.log", cluster_dir() / "log" / "slurmd.log"]


def use_test_cluster() -> Path:
    """Aim every slurm command of the tests (and of the `vlmocr` they start, and of its jobs) at the
    private test cluster: SLURM_CONF as set (scripts/test.sh sets it), else the private conf — never
    a system cluster's /etc/slurm by default. Returns the conf in use."""
    os.environ.setdefault("SLURM_CONF", str(cluster_conf()))
    return Path(os.environ["SLURM_CONF"])

HOSTILE = [
    "two  spaces here.pdf",
    "it's \"quoted\".pdf",
    "$(touch PWNED_dollar).pdf",
    "`touch PWNED_backtick`.pdf",
    "new\nline.pdf",
    "comma,semi;colon.pdf",
    "ümlaut ñ.PDF",
]


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlmocr", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", **(env or {})})


def submit_json(*args: str, cwd: Path) -> dict:
    res = cli("slurm", "submit", *args, "--json", cwd=cwd)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def records(run: Path) -> list[dict]:
    path = run / "pages.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]  # every line parses


def coded_corpus(folder: Path, docs: int, pages: int, first_code: int = 1) -> dict[str, dict[int, str]]:
    """`docs` scanned-looking PDFs of `pages` coded pages; returns {doc_id: {page: text}}."""
    folder.mkdir(parents=True, exist_ok=True)
    truth: dict[str, dict[int, str]] = {}
    code = first_code
    for d in range(docs):
        codes = list(range(code, code + pages))
        code += pages
        make_coded_pdf(folder / f"doc{d}.pdf", codes)
        truth[f"doc{d}"] = {p: expected_text(c) for p, c in enumerate(codes, 1)}
    return truth


def write_exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def no_injection(*roots: Path) -> None:
    for root in roots:
        hits = [p for p in root.rglob("PWNED*") if "staged" not in p.parts] if root.exists() else []
        # Staged symlinks and assembled docs legitimately *name* the hostile files; an executed
        # injection would create a plain file called PWNED_dollar / PWNED_backtick somewhere.
        created = [p for p in hits if p.name in ("PWNED_dollar", "PWNED_backtick", "PWNED_lang", "PWNED_run")]
        assert not created, f"command injection: {created}"


def submit_side_processes(marker: str) -> list[str]:
    """Processes whose command line names `marker` (a test's run directory) and that do not run
    under a SLURM job step (no slurmstepd ancestor): what a `vlmocr slurm` command left waiting
    on the submitting side (the login node). Each as "pid: command line"."""
    def stat(pid: str) -> tuple[str, str] | None:  # (comm, ppid)
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        comm = text[text.index("(") + 1:text.rindex(")")]
        return comm, text[text.rindex(")") + 2:].split()[1]

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker not in cmd:
            continue
        pid, in_job = entry.name, False
        for _ in range(64):
            st = stat(pid)
            if st is None:
                break
            # What a process is, before where it hangs: slurmstepd itself is a child of init.
            if st[0].startswith("slurmstepd"):
                in_job = True
                break
            if st[1] in ("0", "1"):
                break
            pid = st[1]
        if not in_job:
            found.append(f"{entry.name}: {cmd.strip()}")
    return found

"""What bench_feed.py and bench_saturation.py share: the fake vLLM server in its own process,
a `vlmocr run` timed with its CPU sampled by role from /proc, the raw render+encode ceiling in a
warm worker pool, the benchmark profile, and the machine line printed above every table."""

from __future__ import annotations

import collections
import json
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vlmocr.reading.prepare import Prepared
    from vlmocr.runfolder.record import PageRecord

REPO = Path(__file__).resolve().parent.parent
MODEL = "test-model"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def git_state() -> str:
    """The commit and whether the package tree has uncommitted changes (others edit it live)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return "unknown"
    return f"{head}{' + uncommitted changes in src/' if dirty else ''}"


def machine_line() -> str:
    from importlib.metadata import version

    import PIL

    return (f"python {platform.python_version()}, pypdfium2 {version('pypdfium2')}, aiohttp {version('aiohttp')}, "
            f"Pillow {PIL.__version__}, nproc {os.cpu_count()}, load avg {os.getloadavg()[0]:.2f}, "
            f"vlmocr at {git_state()}")


class Server:
    """vlmocr.testing.openai_server in its own process (its own event loop and CPU)."""

    def __init__(self, workdir: Path, *, slots: int, latency: float, static_text: str | None = None,
                 models: tuple[str, ...] = (MODEL,)) -> None:
        self.log = workdir / f"server-{slots}-{latency}.log"
        self.out = workdir / f"server-{slots}-{latency}.url"
        cmd = [sys.executable, "-m", "vlmocr.testing.openai_server", "--port", "0", "--slots", str(slots),
               "--latency", str(latency), "--answer", "static", "--decode", "no"]
        for m in models:
            cmd += ["--model", m]
        if static_text is not None:
            cmd += ["--static-text", static_text]
        with self.out.open("w") as out, self.log.open("w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = self.out.read_text()
            if text.strip():
                self.url = text.splitlines()[0].strip()
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"test server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        self.close()
        raise RuntimeError("test server did not start within 60 s")

    @property
    def root(self) -> str:
        return self.url[: -len("/v1")] if self.url.endswith("/v1") else self.url

    def stats(self) -> dict[str, Any]:
        import httpx2 as httpx

        return httpx.get(f"{self.root}/_stats", timeout=10).json()

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid) or 0.0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def proc_cpu(pid: int) -> float | None:
    """utime + stime of one process in seconds (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def system_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    total = sum(parts[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


def _parents() -> dict[int, int]:
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        out[int(entry.name)] = int(data[data.rindex(b")") + 2:].split()[1])
    return out


class TreeCpu(threading.Thread):
    """Samples the CPU time of a process tree: the root ("main"), its children (forkserver,
    resource tracker: "helpers") and their children (pool "workers"). Pool workers are not
    reaped by the root (the forkserver is their parent), so rusage cannot see them."""

    def __init__(self, root: int, interval: float = 0.1, first_output: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.last: dict[int, float] = {}
        self.role: dict[int, str] = {root: "main"}
        self._halt = threading.Event()
        # CPU by role when `first_output` first holds data (the first finished page): what the
        # start-up cost, so the rest can be counted as steady-state CPU per page.
        self.first_output = first_output
        self.at_first: dict[str, float] | None = None

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            if n % 5 == 0:  # the tree changes only at start-up (and on a worker crash)
                parents = _parents()
                for pid, ppid in parents.items():
                    if ppid == self.root:
                        self.role.setdefault(pid, "helpers")
                    elif self.role.get(ppid) == "helpers":
                        self.role.setdefault(pid, "workers")
            for pid in list(self.role):
                cpu = proc_cpu(pid)
                if cpu is not None:
                    self.last[pid] = cpu
            if self.at_first is None and self.first_output is not None:
                try:
                    if self.first_output.stat().st_size > 0:
                        self.at_first = self.by_role()
                except OSError:
                    pass
            n += 1
            self._halt.wait(self.interval)

    def by_role(self) -> dict[str, float]:
        out = collections.Counter()
        for pid, cpu in list(self.last.items()):
            out[self.role[pid]] += cpu
        return {"main": out["main"], "helpers": out["helpers"], "workers": out["workers"]}

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join()
        return self.by_role()


def read_finished(pages_jsonl: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in pages_jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]


def timestamps(records: list[dict[str, Any]]) -> list[float]:
    return sorted(datetime.fromisoformat(r["finished_at"]).timestamp() for r in records)


def steady_rate(ts: list[float], skip: int) -> float | None:
    """Pages/s between the `skip`-th finished page and the last one (startup excluded)."""
    if len(ts) <= skip + 1 or ts[-1] <= ts[skip - 1]:
        return None
    return (len(ts) - skip) / (ts[-1] - ts[skip - 1])


def run_vlmocr(pdf_or_dir: Path, out: Path, *, endpoint: str, profile: Path, workers: int, concurrency: int,
               extra: list[str] | None = None, steady_skip: int = 10, timeout: float = 900,
               src: Path | None = None) -> dict[str, Any]:
    """One `vlmocr run` in a subprocess: wall time, steady rate, CPU by role, exit code."""
    cmd = [sys.executable, "-m", "vlmocr", "run", str(pdf_or_dir), "--out", str(out), "--endpoint", endpoint,
           "--engine", "openai", "--profile", str(profile), "--model", MODEL, "--workers", str(workers),
           "--concurrency", str(concurrency), "--json", *(extra or [])]
    log = out.with_suffix(".log")
    busy0, total0 = system_busy()
    launched = time.time()
    t0 = time.perf_counter()
    with log.open("w") as err:
        env = dict(os.environ)
        if src is not None:  # another vlmocr source tree first on the path (an A/B experiment)
            env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                                cwd=out.parent, env=env)
        tree = TreeCpu(proc.pid, first_output=out / "pages.jsonl")
        tree.start()
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    wall = time.perf_counter() - t0
    cpu = tree.stop()
    busy1, total1 = system_busy()
    records = read_finished(out / "pages.jsonl") if (out / "pages.jsonl").exists() else []
    ts = timestamps(records) if records else []
    reader: dict[str, Any] = {}
    if (out / "run.json").exists():
        try:
            reader = json.loads((out / "run.json").read_text(encoding="utf-8")).get("current", {}).get("reader") or {}
        except ValueError:
            pass
    summary: dict[str, Any] = {}
    for line in stdout.splitlines()[::-1]:
        if line.startswith("{"):
            summary = json.loads(line)
            break
    return {
        "rc": proc.returncode, "wall": wall, "pages": len(records), "rate": len(records) / wall if wall else 0.0,
        "first": (ts[0] - launched) if ts else None, "steady": steady_rate(ts, steady_skip), "ts": ts, "records": records, "cpu": cpu,
        "machine_busy": (busy1 - busy0) / wall, "machine_cores": (total1 - total0) / wall,
        "summary": summary, "reader": reader, "log": log, "cpu_at_first": tree.at_first, "cmd": cmd,
        "statuses": collections.Counter(r["status"] for r in records),
    }


def med(values: list[float]) -> float:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else float("nan")


def spread(values: list[float]) -> str:
    vals = [v for v in values if v is not None]
    return f"{min(vals):.2f}–{max(vals):.2f}" if vals else "–"


def write_profile(path: Path, *, longest_side: int, name: str = "bench-feed", concurrency: int = 64,
                  front_matter: bool = True) -> Path:
    path.write_text(
        f'name = "{name}"\n'
        f'description = "benchmark profile: PNG, longest side {longest_side} px"\n'
        'prompt = "Transcribe this page."\n'
        'max_tokens = 1024\n'
        f'concurrency = {concurrency}\n'
        '[image]\n'
        f'longest_side = {longest_side}\n'
        'format = "png"\n'
        '[sampling]\n'
        'temperature = 0.1\n'
        '[postprocess]\n'
        + ('front_matter = "yaml"\n' if front_matter else '')
        , encoding="utf-8")
    return path


def raw_task(args: tuple[str, int, int]) -> int:
    """The ceiling: vlmocr's own render + encode of a page (grey pages as one band, as sent)."""
    from vlmocr.inputs.render import Sizing, encode, grey_if_neutral, render_page

    path, page, side = args
    img = render_page(Path(path), page, Sizing(dpi=None, longest_side=side)).image
    return len(encode(grey_if_neutral(img), "png"))


def prepare_task(args: tuple[str, int, int]) -> Prepared | PageRecord:
    """vlmocr's worker function for HTTP engines; the data URL crosses the pipe as in a run."""
    from vlmocr.reading.prepare import prepare_for_http
    from vlmocr.runfolder.record import PageTask, Sizing, VlmHints

    path, page, side = args
    task = PageTask(doc_id="d", source=path, path=path, page=page, doc_pages=None, key="k", engine="openai",
                    reader="openai", sizing=Sizing(dpi=None, longest_side=side, max_pixels=25_000_000),
                    vlm=VlmHints(image_format="png", jpeg_quality=90))
    return prepare_for_http(task)


def pool_cpu(pool: ProcessPoolExecutor) -> float:
    return sum(proc_cpu(pid) or 0.0 for pid in list(getattr(pool, "_processes", {}) or {}))


def time_pool(pool: ProcessPoolExecutor, fn, pdf: Path, pages: list[int], side: int,
              cpu_out: list[float] | None = None) -> float:
    """Pages/s through a warm pool; appends the workers' CPU ms/page to `cpu_out`."""
    c0 = pool_cpu(pool)
    t0 = time.perf_counter()
    futures = [pool.submit(fn, (str(pdf), p, side)) for p in pages]
    for f in futures:
        f.result()
    rate = len(pages) / (time.perf_counter() - t0)
    if cpu_out is not None:
        cpu_out.append((pool_cpu(pool) - c0) / len(pages) * 1e3)
    return rate


def warm_pool(workers: int, pdf: Path, side: int) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver"))
    for f in [pool.submit(prepare_task, (str(pdf), 1 + i % 2, side)) for i in range(4 * workers)]:
        f.result()
    return pool

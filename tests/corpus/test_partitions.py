"""`vlmocr plan --partitions` (corpus/partitions.py, corpus/placement.py): partitions from
sinfo output or a TOML, which of them hold a model by the GPU memory its profile declares, the
per-user cap and time limits as shard counts, the split of the pages, and the command end to end.

The figures are seed 000's (the ALICE production run) and seed 001's (a 27B model on two A40s)."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli
from vlmocr.corpus.partitions import (
    Partition,
    gpu_memory,
    load_partitions,
    parse_partitions_toml,
    parse_sinfo,
    parse_time_limit,
)
from vlmocr.corpus.placement import STARTUP_HOURS, SplitDoc, fit, place, shards_for, split_documents
from vlmocr.exceptions import UsageError
from vlmocr.profiles import MemorySpec, load_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "partitions"
A40 = Partition("gpu_lucdh", gpu="a40", gpu_memory_gb=46, gpus_per_node=2, time_limit="14-00:00:00",
                time_limit_hours=336)
A100_80 = Partition("gpu-a100-80g", gpu="a100_80g", gpu_memory_gb=80, gpus_per_node=4, nodes=2,
                    time_limit="7-00:00:00", time_limit_hours=168, max_gpus_per_user=2)
LAPTOP = Partition("laptop", gpu="rtx4090", gpu_memory_gb=24, gpus_per_node=1)


# ---------------------------------------------------------------- parsing


def test_sinfo_output_in_the_documented_format():
    parsed = parse_sinfo((DATA / "sinfo.txt").read_text(), "sinfo.txt")
    by = {p.name: p for p in parsed.partitions}
    assert list(by) == ["cpu-short", "gpu-short", "gpu-medium", "gpu-a100-80g", "gpu_lucdh", "mig"]
    assert (by["cpu-short"].gpus_per_node, by["cpu-short"].detail) == (0, "no GPUs (GRES (null))")
    # two lines of one partition with the same GPU: one entry, the nodes summed; "24+" CPUs read
    assert (by["gpu-short"].gpu, by["gpu-short"].nodes, by["gpu-short"].gpus_per_node) == ("2080ti", 10, 4)
    assert (by["gpu-short"].gpu_memory_gb, by["gpu-short"].cpus_per_node, by["gpu-short"].time_limit_hours) == (11, 24, 4)
    assert (by["gpu-a100-80g"].gpu_memory_gb, by["gpu-a100-80g"].time_limit_hours) == (80, 7 * 24)
    assert (by["gpu_lucdh"].gpu_memory_gb, by["gpu_lucdh"].gpus_per_node, by["gpu_lucdh"].time_limit_hours) == (46, 2, 336)
    assert by["gpu-medium"].gres == "a100" and by["gpu-medium"].memory_mb == 500000
    assert by["mig"].gpu_memory_gb == 40  # gpu:3g.40gb:2, a MIG slice's size in its name
    # "A100" alone is 40 or 80 GB: the smaller assumed, and said, not guessed silently
    assert len(parsed.warnings) == 1 and parsed.warnings[0].startswith("gpu-medium: GPU 'a100' comes with 40 or 80 GB")


def test_sinfo_line_of_the_wrong_shape_names_the_file_and_line():
    with pytest.raises(UsageError, match=r"saved\.txt:2: expected 6 '\|'-separated fields"):
        parse_sinfo("gpu|gpu:a40:2|1:00:00|1|2|3\ngpu a40 2\n", "saved.txt")
    with pytest.raises(UsageError, match="saved.txt: no partitions"):
        parse_sinfo("PARTITION|GRES|TIMELIMIT|NODES|CPUS|MEMORY\n", "saved.txt")


@pytest.mark.parametrize("text,hours", [
    ("7-00:00:00", 168), ("14-00:00:00", 336), ("4:00:00", 4), ("30", 0.5), ("30:00", 0.5), ("1-12", 36),
    ("2-06:30", 54.5), ("infinite", None), ("UNLIMITED", None),
])
def test_slurm_time_limits(text, hours):
    assert parse_time_limit(text) == hours


@pytest.mark.parametrize("name,gb,warns", [
    ("A40", 46, False), ("NVIDIA A40", 46, False), ("a100_80g", 80, False), ("A100-40GB", 40, False),
    ("H100", 80, False), ("L40S", 46, False), ("RTX 2080 Ti", 11, False), ("tesla_v100-32gb", 32, False),
    ("A100", 40, True), ("V100", 16, True), ("mystery9000", None, True),
])
def test_gpu_memory_table(name, gb, warns):
    memory, warning = gpu_memory(name)
    assert memory == gb and bool(warning) == warns
    if warns:
        assert repr(name) in warning and "gpu_memory_gb" in warning


def test_partitions_toml():
    parsed = load_partitions(DATA / "alice.toml")
    by = {p.name: p for p in parsed.partitions}
    assert (by["gpu_lucdh"].gpu_memory_gb, by["gpu_lucdh"].gpus, by["gpu_lucdh"].time_limit_hours) == (46, 2, 336)
    assert (by["gpu-a100-80g"].gpu_memory_gb, by["gpu-a100-80g"].max_gpus_per_user) == (80, 2)
    assert (by["gpu-short"].gpu_memory_gb, by["gpu-short"].gpus, by["gpu-short"].time_limit_hours) == (11, 12, 4)
    assert parsed.warnings == []  # the A100's memory is given, so nothing is assumed


def test_toml_ambiguous_gpu_without_memory_is_named():
    parsed = parse_partitions_toml('[partition.pub]\ngpu = "A100"\ngpus_per_node = 4\n', "p.toml")
    assert parsed.partitions[0].gpu_memory_gb == 40
    assert parsed.warnings and parsed.warnings[0].startswith("pub: GPU 'A100' comes with 40 or 80 GB")


@pytest.mark.parametrize("text,message", [
    ('[partition.x]\ngpu = "A40"\nspeed = 3\n', r"p\.toml: \[partition\.x\]: unknown key\(s\) speed"),
    ('[partition.x]\ngpu = "A40"\ntime_limit = "a week"\n', r"p\.toml: \[partition\.x\] time_limit: 'a week'"),
    ('[partition.x]\ngpus_per_node = 2\n', r"p\.toml: \[partition\.x\]: give gpu or gpu_memory_gb"),
    ('[partition.x\n', r"p\.toml: not valid TOML"),
    ('gpu = "A40"\n', r"p\.toml: expected only \[partition\.NAME\] tables"),
])
def test_toml_errors_name_the_file(text, message):
    with pytest.raises(UsageError, match=message):
        parse_partitions_toml(text, "p.toml")


# ---------------------------------------------------------------- fitting


def test_35b_moe_in_fp8_fits_one_a40_and_not_a_24gb_laptop():
    # Seed 000: "A 35B mixture-of-experts model in FP8 needs about 35 GB for weights plus the KV
    # cache; a 24 GB laptop runs 4–8B models only." KV margin 5 GB, ÷ 0.9 (vLLM's share).
    need = MemorySpec(params_b=35, dtype="fp8", weights_gb=35, min_gpu_gb=math.ceil((35 + 5) / 0.9)).min_gpu_gb
    assert fit(need, A40).fits and fit(need, A40).tp == 1
    assert fit(need, A100_80).fits and fit(need, A100_80).tp == 1
    laptop = fit(need, LAPTOP)
    assert not laptop.fits and laptop.reason == f"needs {need:g} GB; at most one 24 GB GPU per node = 24 GB"
    # "Partition matches the model's memory footprint; gpu-a100-80g used only when smaller GPUs
    # cannot hold the model": the A40 partition first.
    placed = place("qwen-35b-fp8", need, [A100_80, A40, LAPTOP], 1000, 400, 0.3)
    assert [f.partition.name for f in placed.fitting] == ["gpu_lucdh", "gpu-a100-80g"]


def test_gemma_bf16_fills_an_a100_and_needs_two_a40s():
    # Seed 000: "in BF16 it fills an 80 GB A100 and cannot run on an A40" — the shipped profile's figures.
    need = load_profile("gemma-4").memory.min_gpu_gb
    assert 46 < need <= 80
    assert fit(need, A100_80).tp == 1
    on_a40 = fit(need, A40)  # not on one A40; tensor parallel 2 across the node's two
    assert on_a40.fits and on_a40.tp == 2 and on_a40.reason == "tensor parallel 2 (2 x 46 GB on one node)"
    placed = place("gemma-4", need, [A40, A100_80], 1000, 400, 0.3)
    assert [(f.partition.name, f.tp) for f in placed.fitting] == [("gpu-a100-80g", 1), ("gpu_lucdh", 2)]


def test_27b_bf16_on_two_46gb_a40s_with_tensor_parallel_2():
    # Seed 001: "Qwen3.8-27B in bf16 on two 46 GB cards … --tensor-parallel-size 2".
    need = MemorySpec(params_b=27, dtype="bf16", weights_gb=54, min_gpu_gb=math.ceil((54 + 6) / 0.9)).min_gpu_gb
    f = fit(need, A40)
    assert f.fits and f.tp == 2
    one_a40 = Partition("single", gpu="a40", gpu_memory_gb=46, gpus_per_node=1)
    assert not fit(need, one_a40).fits


def test_per_user_cap_limits_instances_and_tensor_parallel():
    # Seed 000: "The public A100 partition runs at most two GPUs per user at a time
    # (QOSMaxGRESPerUser …). Plan shards around it." 8 GPUs in the partition, 2 usable.
    placed = place("m", 30, [A100_80], 10_000, 500, 0.3)
    f = placed.fitting[0]
    assert (f.instances, f.gpus, f.capped) == (2, 2, True)
    assert f.hours == pytest.approx(10_000 * 1.3 / (500 * 2))
    # A model that needs four 80 GB GPUs would fit the node but not the cap.
    big = fit(300, A100_80)
    assert not big.fits and "per-user cap of 2 GPUs" in big.reason


def test_shards_fit_the_partition_time_limit():
    # Seed 000: "4 hours on gpu-short". 3 nodes x 4 GPUs, one GPU per instance.
    short = Partition("gpu-short", gpu="2080ti", gpu_memory_gb=11, gpus_per_node=4, nodes=3, time_limit="4:00:00",
                      time_limit_hours=4)
    pages, rate = 50_000, 100
    f = place("small", 6, [short], pages, rate, 0.3).fitting[0]
    assert f.instances == 12
    per_shard_hours = pages * 1.3 / rate / f.shards
    assert per_shard_hours <= 4 - STARTUP_HOURS  # every shard ends within the limit, the server's start kept
    assert f.shards % f.instances == 0  # whole waves
    fewer = f.shards - f.instances
    assert pages * 1.3 / rate / fewer > 4 - STARTUP_HOURS  # one wave fewer would not fit
    # 14 days on gpu_lucdh: the same pages fit one shard per GPU
    assert shards_for(pages * 1.3, rate, 2, 336) == 2
    assert shards_for(pages * 1.3, rate, 2, None) == 2


def test_nothing_fits_is_said_plainly():
    placed = place("gemma-4", 78, [LAPTOP, Partition("cpu", detail="no GPUs (GRES (null))")], 100, 100, 0.3)
    assert not placed.fitting
    assert placed.note == ("gemma-4 (needs 78 GB) fits no partition: laptop: needs 78 GB; at most one 24 GB GPU "
                           "per node = 24 GB; cpu: no GPUs (GRES (null))")
    assert place("custom", None, [A40], 100, 100, 0.3).note.startswith("profile custom declares no [memory]")


# ---------------------------------------------------------------- the split


def test_split_keeps_whole_documents_in_order_by_throughput():
    fits = place("m", 30, [A40, A100_80, Partition("x", gpu="a40", gpu_memory_gb=46, gpus_per_node=4)],
                 1, 100, 0.3).fitting
    docs = [SplitDoc(f"d{i:03d}", f"/p/d{i}.pdf", "", float(10 + (i * 37) % 90)) for i in range(300)]
    parts = split_documents(docs, fits)
    placed = [d.doc_id for docs_ in parts.values() for d in docs_]
    assert sorted(placed) == [d.doc_id for d in docs]  # every document exactly once
    for docs_ in parts.values():
        assert [d.doc_id for d in docs_] == sorted(d.doc_id for d in docs_)  # priority order kept
    total = sum(d.weight for d in docs)
    speed = sum(f.throughput for f in fits)
    for f in fits:  # pages in proportion to throughput, within one document
        share = sum(d.weight for d in parts[f.partition.name])
        assert abs(share - total * f.throughput / speed) <= max(d.weight for d in docs)
    # the first documents are spread over all parts, so each starts on the most important ones
    assert all(int(docs_[0].doc_id[1:]) < 10 for docs_ in parts.values())


def _triage_csv(path: Path, docs: list[tuple[str, int, int]]) -> Path:
    from vlmocr.corpus.triage import COLUMNS

    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        base = {c: "" for c in COLUMNS}
        for doc_id, pages, text in docs:
            w.writerow({**base, "doc_id": doc_id, "path": f"/corpus/{doc_id}.pdf", "status": "ok", "pages": pages,
                        "pages_checked": pages, "text_pages": text})
        w.writerow({**base, "doc_id": "broken", "path": "/corpus/broken.pdf", "status": "corrupt", "pages": 0})
        w.writerow({**base, "doc_id": "copy", "path": "/corpus/copy.pdf", "status": "ok", "pages": 9,
                    "pages_checked": 9, "duplicate_of": "doc000"})
    return path


DOCS = [(f"doc{i:03d}", 20 + (i * 53) % 400, (i % 4)) for i in range(60)]


def test_plan_end_to_end_writes_the_split_and_the_commands(tmp_path):
    triage = _triage_csv(tmp_path / "triage.csv", DOCS)
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(DATA / "alice.toml"),
                  "--profile", "gemma-4", "--split-out", str(tmp_path / "split"), "--run", "runs/pl", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["pages_per_hour"] == 400  # the hours table is still there
    (gemma,) = plan["partitions"]["profiles"]
    by = {p["partition"]: p for p in gemma["partitions"]}
    assert [p["partition"] for p in gemma["partitions"]] == ["gpu-a100-80g", "gpu_lucdh", "gpu-short"]
    assert (by["gpu-a100-80g"]["tp"], by["gpu-a100-80g"]["gpus"], by["gpu_lucdh"]["tp"]) == (1, 2, 2)
    assert not by["gpu-short"]["fits"] and "needs 78 GB" in by["gpu-short"]["reason"]
    ocr_pages = sum(p - t for _, p, t in DOCS)
    assert plan["partitions"]["ocr_pages"] == ocr_pages
    assert by["gpu-a100-80g"]["split_pages"] + by["gpu_lucdh"]["split_pages"] == ocr_pages
    # the manifests: every planned document exactly once, in triage order within each part
    seen: list[str] = []
    from vlmocr.inputs.sources import from_manifest

    for name in ("gpu-a100-80g", "gpu_lucdh"):
        manifest = Path(by[name]["manifest"])
        assert manifest == tmp_path / "split" / f"gemma-4-{name}.csv"
        assert manifest.read_text().splitlines()[0] == "doc_id,path"
        ids = [d.doc_id for d in from_manifest(manifest)]
        assert ids == sorted(ids)
        seen += ids
    assert sorted(seen) == [d for d, _, _ in DOCS]
    commands = gemma["commands"]
    assert commands == [
        f"vlmocr slurm submit --manifest {tmp_path}/split/gemma-4-gpu-a100-80g.csv --out runs/pl --part gpu-a100-80g "
        f"--partition gpu-a100-80g --shards {by['gpu-a100-80g']['split_shards']} --gpus-per-task 1 --time 7-00:00:00 "
        "--serve gemma-4",
        f"vlmocr slurm submit --manifest {tmp_path}/split/gemma-4-gpu_lucdh.csv --out runs/pl --part gpu_lucdh "
        f"--partition gpu_lucdh --shards {by['gpu_lucdh']['split_shards']} --gpus-per-task 2 --time 14-00:00:00 "
        "--no-p2p --serve gemma-4"]  # seed 001: tensor parallel on the PCIe A40 pair needs P2P off
    # the text form says the same
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(DATA / "alice.toml"),
                  "--profile", "gemma-4")
    assert res.returncode == 0, res.stderr
    assert "gpu_lucdh: fits on tensor parallel 2 (2 x 46 GB on one node)" in res.stdout
    assert "(per-user cap 2 GPUs)" in res.stdout and "Preferred: gpu-a100-80g" in res.stdout
    assert "--part gpu_lucdh" in res.stdout


def test_plan_with_a_priority_manifest_and_sinfo_on_stdin(tmp_path):
    triage = _triage_csv(tmp_path / "triage.csv", DOCS[:12])
    manifest = tmp_path / "m.csv"
    order = [d for d, _, _ in reversed(DOCS[:12])]
    manifest.write_text("doc_id,path,pages\n" + "".join(
        f"{d},/corpus/{d}.pdf,{'1-3' if d == 'doc005' else ''}\n" for d in order))
    res = subprocess.run([sys.executable, "-m", "vlmocr", "plan", "--triage", str(triage), "--rate", "300",
                          "--partitions", "-", "--profile", "qwen3-vl", "--manifest", str(manifest),
                          "--split-out", str(tmp_path / "out"), "--json"],
                         input=(DATA / "sinfo.txt").read_text(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    profile = json.loads(res.stdout)["partitions"]["profiles"][0]
    written = [p["manifest"] for p in profile["partitions"] if p["manifest"]]
    rows = [row for path in written for row in csv.DictReader(open(path))]
    assert sorted(r["doc_id"] for r in rows) == sorted(order)
    assert [r["pages"] for r in rows if r["doc_id"] == "doc005"] == ["1,2,3"]
    for path in written:
        ids = [r["doc_id"] for r in csv.DictReader(open(path))]
        assert ids == [d for d in order if d in ids]  # the manifest's order, not the triage's


def test_plan_usage_errors_name_the_file(tmp_path):
    triage = _triage_csv(tmp_path / "triage.csv", DOCS[:3])
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(tmp_path / "nope.toml"))
    assert res.returncode == 3 and f"--partitions {tmp_path / 'nope.toml'}: no such file" in res.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[partition.x]\ngpu = "A40"\nspeed = 1\n')
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(bad))
    assert res.returncode == 3 and f"{bad}: [partition.x]: unknown key(s) speed" in res.stderr
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--split-out", str(tmp_path / "s"))
    assert res.returncode == 3 and "--split-out go with --partitions" in res.stderr
    # no rate at all, and the partitions give none either
    res = run_cli("plan", "--triage", str(triage), "--partitions", str(DATA / "alice.toml"), "--profile", "qwen3-vl")
    assert res.returncode == 3 and "partition gpu_lucdh: no rate" in res.stderr


def test_plan_rates_per_partition_need_no_global_rate(tmp_path):
    triage = _triage_csv(tmp_path / "triage.csv", DOCS[:20])
    toml = tmp_path / "p.toml"
    # Seed 000's measured Gemma 4 31B FP8 rates: "about 430 dense pages an hour per A40 … about 1,700 on an A100".
    toml.write_text('[partition.a40]\ngpu = "A40"\ngpus_per_node = 2\npages_per_hour_per_gpu = 430\n'
                    '[partition.a100]\ngpu = "A100_80g"\ngpus_per_node = 1\npages_per_hour_per_gpu = 1700\n')
    res = run_cli("plan", "--triage", str(triage), "--partitions", str(toml), "--profile", "qwen3-vl", "--json")
    assert res.returncode == 0, res.stderr
    parts = {p["partition"]: p for p in json.loads(res.stdout)["partitions"]["profiles"][0]["partitions"]}
    assert parts["a40"]["rate_per_gpu"] == 430 and parts["a100"]["rate_per_gpu"] == 1700
    # the A100 (1,700/h) takes about twice the pages of the two A40s (860/h)
    ratio = parts["a100"]["split_pages"] / parts["a40"]["split_pages"]
    assert 1.5 < ratio < 2.6


def test_a_part_has_no_more_shards_than_documents(tmp_path):
    # 3 documents, 16 GPUs on the A100 partition: 3 shards, not 16 with 13 left empty
    triage = _triage_csv(tmp_path / "triage.csv", DOCS[:3])
    res = run_cli("plan", "--triage", str(triage), "--rate", "10", "--partitions", str(DATA / "sinfo.txt"),
                  "--profile", "gemma-4", "--json")
    assert res.returncode == 0, res.stderr
    parts = json.loads(res.stdout)["partitions"]["profiles"][0]["partitions"]
    fitting = [p for p in parts if p["fits"]]
    assert fitting[0]["partition"] == "gpu-a100-80g" and fitting[0]["shards"] == 16
    assert sum(p["split_docs"] for p in fitting) == 3
    assert all(p["split_shards"] <= p["split_docs"] for p in fitting)


def test_plan_warns_of_fp8_on_ampere_partitions(tmp_path):
    """Seed 001: "`cutlass_scaled_mm_sm80` error with `--quantization fp8` — vLLM's FP8 path fails on
    Ampere cards"; seed 000 ran FP8 on A40s and A100s. A proposal of FP8 weights there says both."""
    prof = tmp_path / "profiles"
    prof.mkdir()
    text = load_profile("gemma-4").source.read_text()
    text = text.replace('name = "gemma-4"', 'name = "gemma-4-fp8"').replace('dtype = "bf16"', 'dtype = "fp8"')
    text = text.replace("weights_gb = 62", "weights_gb = 31").replace("min_gpu_gb = 78", "min_gpu_gb = 44")
    (prof / "gemma-4-fp8.toml").write_text(text)
    triage = _triage_csv(tmp_path / "triage.csv", DOCS)
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(DATA / "alice.toml"),
                  "--profile", "gemma-4-fp8", env={"VLMOCR_PROFILE_PATH": str(prof)})
    assert res.returncode == 0, res.stderr
    warned = [line for line in (res.stdout + res.stderr).splitlines() if "gemma-4-fp8 on" in line]
    assert warned and "gpu_lucdh" in warned[0] and "cutlass_scaled_mm_sm80" in warned[0]
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(DATA / "alice.toml"),
                  "--profile", "gemma-4")
    assert "cutlass" not in res.stdout + res.stderr  # bf16: nothing to warn of


def test_a_partition_with_two_gpu_types_is_two_parts_with_their_own_share(tmp_path):
    """Issue 32, point 4: two sinfo lines of one partition (a100 and h100 nodes) gave both halves
    every document, one shared split file and two `slurm submit --part g` commands: every page read
    twice, or two submits that collide. Each GPU type is now a part of its own (g-a100, g-h100):
    its own share of the documents, its own file, and its type in --gpus-per-task."""
    sinfo = tmp_path / "sinfo.txt"
    sinfo.write_text("g|gpu:a100:4|7-00:00:00|2|64|500000\ng|gpu:h100:4|7-00:00:00|2|64|500000\n")
    triage = _triage_csv(tmp_path / "triage.csv", DOCS)
    res = run_cli("plan", "--triage", str(triage), "--rate", "400", "--partitions", str(sinfo), "--profile",
                  "olmocr-2", "--split-out", str(tmp_path / "split"), "--run", "runs/pl", "--json")
    assert res.returncode == 0, res.stderr
    (pl,) = json.loads(res.stdout)["partitions"]["profiles"]
    parts = {p["part"]: p for p in pl["partitions"] if p["fits"]}
    assert set(parts) == {"g-a100", "g-h100"} and {p["partition"] for p in parts.values()} == {"g"}
    assert parts["g-a100"]["manifest"] != parts["g-h100"]["manifest"]
    seen: list[str] = []
    for p in parts.values():
        seen += [row["doc_id"] for row in csv.DictReader(open(p["manifest"]))]
    assert sorted(seen) == sorted(d for d, _, _ in DOCS)  # every document once
    commands = pl["commands"]
    assert len(commands) == 2 and len({c.split("--part ")[1].split()[0] for c in commands}) == 2
    assert any("--gpus-per-task a100:1" in c for c in commands) and any("--gpus-per-task h100:1" in c for c in commands)


@pytest.mark.parametrize("text, said", [
    ("g|gpu:a100:4|1:00:00|-20|64|500000\n", "no negative number of nodes"),
    ("g|gpu:a100:4|1:00:00|2|64|500000\x1b[31m\n", "control character"),
])
def test_sinfo_that_cannot_be_sinfo_is_said_so(text, said):
    with pytest.raises(UsageError, match=said):
        parse_sinfo(text, "s.txt")


def test_a_bom_is_not_a_partition_name():
    parts = parse_sinfo("\ufeffPARTITION|GRES|TIMELIMIT|NODES|CPUS|MEMORY\ng|gpu:a40:2|1:00:00|1|8|1000\n", "s.txt")
    assert [p.name for p in parts.partitions] == ["g"]

"""vLLM's model-info entries kept between server starts (cluster/serve/modelinfo.py): a server
gets the kept entries in its private cache before it starts, and what it wrote there is kept after
it stops; nothing else of the private cache is."""

from __future__ import annotations

from pathlib import Path

from support.serve_standin import launch
from vlmocr.cluster.serve import modelinfo

ENTRY = "vllm-model_executor-models-fake-FakeForConditionalGeneration.json"


def test_a_second_start_finds_what_the_first_inspected(tmp_path, scratch):
    cache = tmp_path / "vlmocr-cache"
    first, rec = launch(tmp_path, scratch, "dots-ocr",
                        env_extra={"VLMOCR_CACHE_DIR": str(cache), "FAKE_VLLM_MODELINFO": ENTRY})
    assert rec["modelinfos"] == []  # nothing kept yet: vLLM inspects
    assert (cache / modelinfo.KEPT / ENTRY).read_text() == '{"hash": "fake", "modelinfo": {}}'
    # The private cache itself is gone with the server: only the entries were taken.
    assert not Path(rec["env"]["VLLM_CACHE_ROOT"]).exists()
    assert rec["env"]["VLLM_CACHE_ROOT"].startswith(str(scratch))

    (tmp_path / "record.json").unlink()
    _, rec = launch(tmp_path, scratch, "dots-ocr", env_extra={"VLMOCR_CACHE_DIR": str(cache)})
    assert rec["modelinfos"] == [ENTRY]  # seeded before the start


def test_only_entry_files_are_seeded_and_kept(tmp_path):
    env = {"VLMOCR_CACHE_DIR": str(tmp_path / "c")}
    kept = modelinfo.kept_dir(env)
    kept.mkdir(parents=True)
    (kept / ENTRY).write_text("{}")
    (kept / "notes.txt").write_text("not an entry")
    (kept / "big.json").write_bytes(b" " * (modelinfo.MAX_BYTES + 1))
    (kept / "link.json").symlink_to(kept / ENTRY)
    root = tmp_path / "server" / "vllm"
    assert modelinfo.seed(root, env) == 1
    assert sorted(p.name for p in (root / "modelinfos").iterdir()) == [ENTRY]

    (root / "modelinfos" / "new.json").write_text('{"hash": "h"}')
    assert modelinfo.keep(root, env) == 1  # the unchanged entry is not written again
    assert (kept / "new.json").read_text() == '{"hash": "h"}'
    assert not list(kept.glob(".*"))  # no temporary file left


def test_the_default_place_follows_xdg_and_home():
    assert modelinfo.kept_dir({"HOME": "/h"}) == Path("/h/.cache/vlmocr/vllm-modelinfos")
    assert modelinfo.kept_dir({"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/x/vlmocr/vllm-modelinfos")
    assert modelinfo.kept_dir({"HOME": "/h", "VLMOCR_CACHE_DIR": "/v"}) == Path("/v/vllm-modelinfos")


def test_an_unwritable_kept_directory_costs_an_inspection_not_a_start(tmp_path, scratch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    _, rec = launch(tmp_path, scratch, "dots-ocr",
                    env_extra={"VLMOCR_CACHE_DIR": str(blocker), "FAKE_VLLM_MODELINFO": ENTRY})
    assert rec["modelinfos"] == []

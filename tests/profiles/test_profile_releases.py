"""Issue 25: every serving recipe was checked against the released vLLM and SGLang code
(scripts/check_releases.py reads the wheels), and no recipe changes without being checked again."""

from __future__ import annotations

from support.components import REPO
from vlmocr.profiles import list_profiles, load_profile
from vlmocr.profiles.releases import TABLE_END, TABLE_START, load_checked, recipe_digest, release_table, stale_profiles


def test_every_shipped_profile_is_the_one_checked_against_the_releases():
    stale = stale_profiles()
    assert not stale, (f"profiles changed since they were checked against the released servers: {stale}; "
                       "run `python scripts/check_releases.py --docs` and commit its file")


def test_the_check_covers_the_versions_the_issue_names_and_nothing_fails():
    data = load_checked()
    assert data["versions"]["vllm"] == ["0.31.0", "0.32.0", "0.33.0", "0.34.0"]
    assert data["versions"]["sglang"][0] == "0.5.10.post1" and data["versions"]["sglang"][-1] >= "0.5.23"
    names = {p.name for p in list_profiles()}
    assert set(data["profiles"]) == names
    for name, entry in data["profiles"].items():
        for key, result in entry["results"].items():
            assert result["result"] in ("works", "refused"), (name, key, result)
    # The two flagship recipes the released vLLM refused before: now told apart by version.
    uocr = data["profiles"]["unlimited-ocr"]["results"]
    assert uocr["vllm 0.34.0"]["result"] == "works" and "loop defence only" in uocr["vllm 0.34.0"]["note"]
    assert uocr["sglang 0.5.10.post1"]["result"] == "refused"


def test_a_changed_recipe_changes_its_digest():
    prof = load_profile("gemma-4")
    changed = prof.model_copy(deep=True)
    changed.extra_body["vllm"]["mm_processor_kwargs"] = {"max_soft_tokens": 1120}
    assert recipe_digest(changed) != recipe_digest(prof)
    reworded = prof.model_copy(update={"description": "another description"})
    assert recipe_digest(reworded) == recipe_digest(prof)  # only what reaches a server counts


def test_the_docs_table_is_the_one_the_check_wrote():
    text = (REPO / "docs" / "servers.md").read_text(encoding="utf-8")
    table = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)].strip()
    assert table == release_table().strip()

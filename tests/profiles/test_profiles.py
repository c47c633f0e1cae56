"""Model profiles are data: every shipped file loads, mistakes name their file, users can add
and override profiles without touching Python."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from vlmocr.exceptions import ExitCode, UsageError
from vlmocr.profiles import Profile, list_profiles, load_profile, profile_dir, prompt_id

REQUIRED = {
    "generic",
    "unlimited-ocr",
    "deepseek-ocr",
    "olmocr-2",
    "dots-ocr",
    "paddleocr-vl",
    "nanonets-ocr2",
    "granite-docling",
    "qwen3-vl",
    "chandra",
    "lightonocr-2",
    "gemma-4",
}

MINIMAL = 'name = "{name}"\nprompt = "Read the page."\n'


@pytest.fixture(autouse=True)
def _no_user_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLMOCR_PROFILE_PATH", raising=False)


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_shipped_profile_loads() -> None:
    files = sorted(profile_dir().glob("*.toml"))
    assert {f.stem for f in files} >= REQUIRED
    for path in files:
        profile = load_profile(path.stem)
        assert profile.name == path.stem
        assert profile.source == path
        assert profile.description and profile.license
        assert profile.image_only or profile.prompt
        assert {"vllm", "sglang"} <= set(profile.serve), f"{path.name}: serve flags for both servers"


def test_list_profiles_is_sorted_and_complete() -> None:
    names = [p.name for p in list_profiles()]
    assert names == sorted(names)
    assert set(names) >= REQUIRED


def test_unknown_key_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "typo", MINIMAL.format(name="typo") + "temprature = 0.2\n")
    monkeypatch.setenv("VLMOCR_PROFILE_PATH", str(tmp_path))
    with pytest.raises(UsageError) as err:
        load_profile("typo")
    assert str(path) in str(err.value)
    assert "temprature" in str(err.value)
    assert err.value.exit_code == ExitCode.usage


def test_unknown_nested_key_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "nested", MINIMAL.format(name="nested") + "[image]\ndpii = 300\n")
    monkeypatch.setenv("VLMOCR_PROFILE_PATH", str(tmp_path))
    with pytest.raises(UsageError, match="dpii") as err:
        load_profile("nested")
    assert str(path) in str(err.value)
    # A broken file on the path also stops `profiles list`, naming the file.
    with pytest.raises(UsageError, match="nested.toml"):
        list_profiles()


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "broken", 'name = "broken"\nprompt = "unterminated\n')
    with pytest.raises(UsageError, match="not valid TOML") as err:
        load_profile(path)
    assert str(path) in str(err.value)


def test_bad_value_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "bad", MINIMAL.format(name="bad") + '[image]\nformat = "gif"\n')
    with pytest.raises(UsageError, match="format"):
        load_profile(path)


def test_user_directory_adds_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, "mine", MINIMAL.format(name="mine"))
    write(second, "generic", 'name = "generic"\nprompt = "My own generic prompt."\n')
    monkeypatch.setenv("VLMOCR_PROFILE_PATH", f"{first}:{second}")
    assert load_profile("mine").prompt == "Read the page."
    assert load_profile("generic").prompt == "My own generic prompt."
    by_name = {p.name: p for p in list_profiles()}
    assert by_name["generic"].source == second / "generic.toml"
    assert set(by_name) >= REQUIRED | {"mine"}


def test_path_to_toml_is_accepted(tmp_path: Path) -> None:
    # A file given by path may carry any name; only search directories are keyed by file name.
    path = write(tmp_path, "some-file", MINIMAL.format(name="tuned"))
    assert load_profile(str(path)).name == "tuned"
    assert load_profile(path).source == path
    with pytest.raises(UsageError, match="does not exist"):
        load_profile(tmp_path / "missing.toml")


def test_name_must_match_file_in_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "alpha", MINIMAL.format(name="beta"))
    monkeypatch.setenv("VLMOCR_PROFILE_PATH", str(tmp_path))
    with pytest.raises(UsageError, match="does not match the file name"):
        load_profile("alpha")


def test_unknown_profile_lists_known_ones() -> None:
    with pytest.raises(UsageError) as err:
        load_profile("no-such-model")
    assert "unlimited-ocr" in str(err.value) and "olmocr-2" in str(err.value)


def test_prompt_id_is_a_stable_short_sha256() -> None:
    profile = load_profile("unlimited-ocr")
    assert profile.prompt == "<image>document parsing."
    assert profile.prompt_id == hashlib.sha256(b"<image>document parsing.").hexdigest()[:12]
    # Pinned: a change here means the shipped prompt changed, and every page will be re-read.
    assert profile.prompt_id == "a210f5b991d3"
    assert load_profile("unlimited-ocr").prompt_id == profile.prompt_id
    assert profile.prompt_id_for("sglang") == prompt_id("document parsing.") == "ae22ae5ff343"
    assert profile.prompt_id_for("vllm", pages=3) == prompt_id("<image><image><image>Multi page parsing.")
    assert profile.prompt_id_for("sglang", pages=3) == prompt_id("Multi page parsing.")
    assert load_profile("olmocr-2").prompt_id != profile.prompt_id


def test_image_only_and_prompt_rules() -> None:
    lighton = load_profile("lightonocr-2")
    assert lighton.image_only and lighton.prompt == ""
    with pytest.raises(ValueError, match="image_only"):
        Profile(name="x", image_only=True, prompt="Read.")
    with pytest.raises(ValueError, match="prompt is empty"):
        Profile(name="x")
    with pytest.raises(ValueError, match="name"):
        Profile(name="Has Spaces", prompt="Read.")


def test_unlimited_ocr_serve_flags_follow_its_docs() -> None:
    profile = load_profile("unlimited-ocr")
    argv = profile.serve["vllm"].argv()
    assert "--trust-remote-code" in argv
    # Seed 004's n-gram processor only where the released vLLM has one that starts (issue 25).
    parts = {p.versions: p for p in profile.serve["vllm"].by_version}
    assert parts[">=0.31,<0.34"].args == ["--logits-processors",
                                          "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor"]
    assert parts[">=0.31,<0.34"].env == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert parts[">=0.34"].args == [] and parts[">=0.34"].when_unknown
    assert "--logits-processors" not in argv
    assert "--no-enable-prefix-caching" in argv
    assert argv[argv.index("--mm-processor-cache-gb") + 1] == "0"
    sglang = profile.serve["sglang"].argv()
    assert "--enable-custom-logit-processor" in sglang
    assert sglang[sglang.index("--page-size") + 1] == "1"


def test_dots_ocr_needs_string_content_format() -> None:
    argv = load_profile("dots-ocr").serve["vllm"].argv()
    assert argv[argv.index("--chat-template-content-format") + 1] == "string"


def test_json_valued_serve_flags_render_as_json() -> None:
    argv = load_profile("lightonocr-2").serve["vllm"].argv()
    assert argv[argv.index("--limit-mm-per-prompt") + 1] == '{"image":1}'


def test_olmocr_profile_matches_its_toolkit() -> None:
    profile = load_profile("olmocr-2")
    assert profile.image.longest_side == 1288
    assert profile.image_position == "after"
    assert profile.postprocess.front_matter == "yaml"
    assert profile.sampling.temperature == 0.1
    assert profile.prompt.startswith("Attached is one page of a document that you must process.")


def test_retry_sampling_keys_are_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "r", MINIMAL.format(name="r") + "[retry]\nsampling = { top_q = 0.9 }\n")
    with pytest.raises(UsageError, match="top_q"):
        load_profile(path)


@pytest.mark.parametrize(("toml", "problem"), [
    ('model = "org/m\\ntouch x"\n', "model 'org/m\\ntouch x' contains a control character"),
    ('revision = "abc\\u001b[2J"\n', "revision 'abc\\x1b[2J' contains a control character"),
    ('[serve.vllm]\nenv = { "A=1; touch x; B" = "1" }\n', "serve.vllm.env: 'A=1; touch x; B' is not an environment variable name"),
    ('[serve.vllm]\nenv = { VAR = "a\\nb" }\n', "serve.vllm.env.VAR 'a\\nb' contains a control character"),
    ('[serve.sglang]\nargs = ["--x", "1\\r2"]\n', "serve.sglang.args '1\\r2' contains a control character"),
])
def test_names_with_control_characters_are_refused_in_one_line(tmp_path: Path, toml: str, problem: str) -> None:
    """What a profile names goes into server command lines, environments and the script `serve
    --print` shows: a newline or escape there, or an environment name that is not one, is
    refused with one line naming the file."""
    path = write(tmp_path, "hostile", MINIMAL.format(name="hostile") + toml)
    with pytest.raises(UsageError) as err:
        load_profile(path)
    assert str(err.value) == f"profile {path}: {problem}" and err.value.exit_code == ExitCode.usage


def test_a_name_ending_in_a_newline_is_not_a_name() -> None:
    with pytest.raises(ValueError, match="use lowercase letters"):
        Profile(name="generic\n", prompt="Read the page.")
    with pytest.raises(ValueError, match="contains a control character"):
        Profile(name="generic", prompt="Read the page.", model="org/m\n")

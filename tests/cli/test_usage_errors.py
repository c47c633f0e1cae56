"""Every mistake a newcomer makes on the command line is one line naming what is wrong, exit 3,
before any work starts — never a run that reads nothing and exits 1, never a traceback.
The real `vlmocr` command (in this process where a subprocess would only add imports)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.cli import cli_in_process, run_cli, textlayer_run
from support.documents import make_doc
from vlmocr.exceptions import ExitCode


def one_line(proc, *expected: str) -> str:
    """The command failed as a usage error with one line on stderr holding every `expected`."""
    assert proc.returncode == ExitCode.usage, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A document, a run of it, a SLURM-like run with one shard, an existing file and folder."""
    root = tmp_path_factory.mktemp("usage")
    src = root / "src"
    doc = make_doc(src, "a.pdf", 1, 1)
    run = root / "run"
    textlayer_run(run, src)
    textlayer_run(root / "sharded" / "shards" / "1", src)
    (root / "a-file").write_text("not a folder")
    (root / "a-folder").mkdir()
    return {"root": root, "src": src, "doc": doc, "run": run, "sharded": root / "sharded"}


# ------------------------------------------------------------------ point 3: missing inputs


def test_a_missing_input_is_a_usage_error_before_any_work(world):
    out = world["root"] / "never-made"
    missing = world["root"] / "no" / "such" / "dir"
    proc = cli_in_process("run", str(missing), "--out", str(out), "--engine", "textlayer")
    one_line(proc, "input not found", str(missing))
    assert not out.exists()  # no run folder for a run that cannot start
    # Several: one line naming them all; an existing input beside them changes nothing.
    proc = cli_in_process("run", str(world["doc"]), str(missing), str(world["root"] / "gone.pdf"),
                          "--out", str(out), "--engine", "textlayer")
    one_line(proc, "inputs not found", str(missing), "gone.pdf")
    assert not out.exists()


def test_a_working_folder_deleted_under_the_shell_is_named(world, tmp_path):
    """`cd scans && rm -r ../scans` (or a scratch folder cleaned under a session) left `run` to end
    in "internal error while planning: FileNotFoundError" (exit 7)."""
    import subprocess
    import sys

    gone, out = tmp_path / "gone", tmp_path / "out"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m vlmocr run '
                           f'"{world["doc"]}" --out "{out}" --engine textlayer'],
                          capture_output=True, text=True, timeout=120)
    one_line(proc, "the current folder no longer exists", "cd to a folder that exists")
    assert not out.exists()


def test_slurm_submit_refuses_a_missing_input_before_staging(world):
    out = world["root"] / "slurm-never"
    proc = cli_in_process("slurm", "submit", str(world["root"] / "nowhere.pdf"), "--out", str(out), "--shards", "2",
                          "--dry-run")
    one_line(proc, "input not found", "nowhere.pdf")
    assert not out.exists()


def test_a_manifest_naming_a_missing_file_stays_that_documents_bad_input(world, tmp_path):
    """Only inputs named on the command line are usage errors: a manifest row whose file is gone
    is that document's record, and the other documents are read."""
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"doc_id,path\nthere,{world['doc']}\ngone,{tmp_path / 'gone.pdf'}\n")
    out = tmp_path / "run"
    proc = run_cli("run", "--manifest", str(manifest), "--out", str(out), "--engine", "textlayer", "--workers", "1")
    assert proc.returncode == ExitCode.bad_inputs, proc.stderr  # finished; an input is unreadable
    assert "ok=1" in proc.stdout and "failed=1" in proc.stdout


# ------------------------------------------------------------------ point 6: unknown profile


def test_an_unknown_profile_is_named_with_the_known_ones(world):
    out = world["root"] / "profile-never"
    proc = cli_in_process("run", str(world["doc"]), "--profile", "nosuch", "--out", str(out))
    line = one_line(proc, "unknown profile 'nosuch'", "known profiles:")
    shipped = sorted(p.stem for p in (Path(__import__("vlmocr.profiles").profiles.__file__).parent).glob("*.toml"))
    assert all(name in line for name in shipped) and "--endpoint" not in line
    assert not out.exists()


# ------------------------------------------------------------------ point 5: outputs


def bad_targets(root: Path, folder: bool) -> list[tuple[Path, str]]:
    """(path, what the line says): an existing file (or folder, for a file output), a path under
    a file, and a place nobody may create anything (/sys: read-only even for root)."""
    exists = root / ("a-file" if folder else "a-folder")
    return [
        (exists, "is not a folder" if folder else "is a folder"),
        (root / "a-file" / "x.out", "is not a folder"),
        (Path("/sys/vlmocr-cannot-create"), "/sys/"),
    ]


COMMANDS = {
    # name: (argv before the output path, the option, output is a folder)
    "run": (lambda w: ["run", str(w["doc"]), "--engine", "textlayer", "--workers", "1"], "--out", True),
    "export-md": (lambda w: ["export", str(w["run"]), "--format", "md"], "--out", True),
    "export-jsonl": (lambda w: ["export", str(w["run"]), "--format", "jsonl"], "--out", False),
    "report": (lambda w: ["report", str(w["run"]), "--max-thumbs", "0"], "--out", True),
    "merge": (lambda w: ["merge", str(w["sharded"])], "--out", True),
    "triage": (lambda w: ["triage", str(w["src"]), "--workers", "1"], "--out", False),
    "dedup": (lambda w: ["dedup", str(w["src"]), "--workers", "1"], "--manifest-out", False),
    "slurm-submit": (lambda w: ["slurm", "submit", str(w["src"]), "--shards", "2", "--dry-run"], "--out", True),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_that_cannot_be_written_is_one_line_and_exit_3(world, command):
    argv, option, folder = COMMANDS[command]
    for target, says in bad_targets(world["root"], folder):
        if command == "export-jsonl" and target.name == "x.out":
            target = target.with_name("x.jsonl")  # a .jsonl name: the one-file export
        elif command == "export-jsonl" and target == world["root"] / "a-folder":
            continue  # a folder named without .jsonl is the folder export, which takes an empty folder
        elif command == "dedup" and target == world["root"] / "a-folder":
            says = "name it .jsonl or .csv"  # the manifest's format comes from its name, checked first
        elif command == "dedup":
            target = target.with_name(target.name + ".csv")
        before = sorted(os.listdir(world["root"]))
        proc = cli_in_process(*argv(world), option, str(target))
        one_line(proc, says, target.name)
        assert sorted(os.listdir(world["root"])) == before, command  # nothing made beside it


# ------------------------------------------------------------------ point 4: config files


def test_a_config_file_mixing_top_level_keys_and_a_run_table_is_refused(world, tmp_path):
    """The keys beside [run] used to be dropped without a word (tesseract asked, RapidOCR run)."""
    mixed = tmp_path / "mixed.toml"
    mixed.write_text('engine = "tesseract"\nlang = "deu"\n[run]\nworkers = 1\n')
    out = tmp_path / "run"
    proc = cli_in_process("run", str(world["doc"]), "--out", str(out), "--config", str(mixed))
    one_line(proc, str(mixed), "engine, lang", "[run]")
    assert not out.exists()
    # Either form alone is read whole.
    for text in ('engine = "textlayer"\nworkers = 1\n', '[run]\nengine = "textlayer"\nworkers = 1\n'):
        mixed.write_text(text)
        proc = run_cli("run", str(world["doc"]), "--out", str(out), "--config", str(mixed))
        assert proc.returncode == ExitCode.ok, proc.stderr
        settings = json.loads((out / "run.json").read_text())["settings"]
        assert settings["engine"] == "textlayer" and settings["workers"] == 1


# ------------------------------------------------------------------ point 7: VLMOCR_* values


@pytest.mark.parametrize(("variable", "value", "argv"), [
    ("VLMOCR_WORKERS", "abc", ["run", "{doc}", "--out", "{out}"]),  # a run setting
    ("VLMOCR_DPI", "5", ["run", "{doc}", "--out", "{out}"]),  # out of range
    ("VLMOCR_MAX_DOC_PAGES", "lots", ["triage", "{doc}", "--out", "{out}.csv"]),  # read in the workers
    ("VLMOCR_SERVE_HEALTH_TIMEOUT", "soon", ["profiles", "list"]),
    ("VLMOCR_SERVE_NO_P2P", "maybe", ["profiles", "list"]),  # was read as "not 1": off, silently
    ("VLMOCR_VLLM_BIN", '"unclosed', ["serve", "generic", "--print"]),
])
def test_an_invalid_environment_value_is_named(world, tmp_path, monkeypatch, variable, value, argv):
    monkeypatch.setenv(variable, value)
    out = tmp_path / "out"
    proc = cli_in_process(*[a.format(doc=world["doc"], out=out) for a in argv])
    one_line(proc, f"{variable}={value!r}")
    assert not list(tmp_path.iterdir())


def test_an_invalid_config_file_value_names_the_file_and_the_command_line_wins(world, tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text('workers = "many"\n')
    proc = cli_in_process("run", str(world["doc"]), "--out", str(tmp_path / "r"), "--config", str(config))
    one_line(proc, f"{config}: workers")
    # A bad variable the command line overrides is not used, so not an error either.
    monkeypatch.setenv("VLMOCR_WORKERS", "abc")
    proc = run_cli("run", str(world["doc"]), "--out", str(tmp_path / "r"), "--engine", "textlayer", "--workers", "1",
                   env={"VLMOCR_WORKERS": "abc"})
    assert proc.returncode == ExitCode.ok, proc.stderr


def test_a_bug_is_exit_7_with_its_traceback_never_exit_1(tmp_path, monkeypatch, capsys):
    # Exit 1 tells a scheduler "pages missing: resubmit"; a bug resubmitted fails the same way.
    import pytest

    from vlmocr.cli import main
    from vlmocr.exceptions import ExitCode
    from vlmocr.library import export as export_module

    def broken(*args, **kwargs):
        raise ValueError("All strings must be XML compatible")  # what lxml said of a control character

    monkeypatch.setattr(export_module, "export", broken)
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(SystemExit) as ended:
        main(["export", str(run), "--format", "alto", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert ended.value.code == ExitCode.internal == 7
    assert "Traceback" in err and "ValueError: All strings must be XML compatible" in err and "internal error" in err

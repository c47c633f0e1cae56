"""Issue 46, point 3: a truth set names only files in its own folder. Truth sets are downloaded from
others and reports are shared: a CSV row whose truth file is `../…`, an absolute path or a link out
of the CSV's folder, or a truth folder holding a link to a file elsewhere, was read and put into
the report. Now it is refused, exit 3, naming the row — unless VLMOCR_TRUTH_OUTSIDE=1 says so."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_text_pdf
from vlmocr.exceptions import ExitCode

SECRET = "the private notes of somebody else\nnot for a shared report"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("truth-outside")
    make_text_pdf(root / "letter.pdf", [["Dear Sir, thank you for the books", "which arrived on Monday."]])
    run = root / "run"
    assert run_cli("run", str(root / "letter.pdf"), "--out", str(run), "--engine", "textlayer").returncode == 0
    (root / "elsewhere").mkdir()
    secret = root / "elsewhere" / "secret.txt"
    secret.write_text(SECRET, encoding="utf-8")
    return {"root": root, "run": run, "secret": secret}


def truth_csv(folder: Path, truth_path: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "truth.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["doc_id", "page", "truth_path"])
        w.writerow(["letter", "1", truth_path])
    return path


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "link out"])
def test_a_truth_csv_naming_a_file_outside_its_folder_is_refused_naming_the_row(world, tmp_path, how):
    folder = tmp_path / "truth"
    if how == "link out":
        folder.mkdir()
        (folder / "page.txt").symlink_to(world["secret"])
        ref = "page.txt"
    else:
        ref = {"dot-dot": "../" * 12 + str(world["secret"]).lstrip("/"), "absolute": str(world["secret"])}[how]
    truth = truth_csv(folder, ref)
    for command in (["evaluate", str(world["run"]), "--truth", str(truth)],
                    ["report", str(world["run"]), "--truth", str(truth), "--out", str(tmp_path / "report")]):
        res = run_cli(*command)
        assert res.returncode == ExitCode.usage, (command, res.stderr)
        assert f"{truth}:2" in res.stderr and "outside the truth's folder" in res.stderr and "VLMOCR_TRUTH_OUTSIDE" in res.stderr
        assert "Traceback" not in res.stderr
    assert not (tmp_path / "report").exists() or SECRET.split()[1] not in "".join(
        p.read_text(errors="ignore") for p in (tmp_path / "report").rglob("*.html"))
    # Told so explicitly, it is read.
    res = run_cli("evaluate", str(world["run"]), "--truth", str(truth), "--json", env={"VLMOCR_TRUTH_OUTSIDE": "1"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["corpus"]["pages"] == 1


def test_a_truth_folder_holding_a_link_to_a_file_elsewhere_is_refused(world, tmp_path):
    folder = tmp_path / "gt"
    folder.mkdir()
    (folder / "letter.txt").symlink_to(world["secret"])
    res = run_cli("evaluate", str(world["run"]), "--truth", str(folder))
    assert res.returncode == ExitCode.usage and "outside the truth's folder" in res.stderr, res.stderr
    # A link inside the folder is the folder's own.
    (folder / "letter.txt").unlink()
    (folder / "real.txt").write_text("Dear Sir, thank you for the books\nwhich arrived on Monday.", encoding="utf-8")
    (folder / "letter.txt").symlink_to(folder / "real.txt")
    (folder / "real.txt").rename(folder / ".real.txt")  # hidden: not a truth of its own
    (folder / "letter.txt").unlink()
    (folder / "letter.txt").symlink_to(folder / ".real.txt")
    res = run_cli("evaluate", str(world["run"]), "--truth", str(folder), "--json")
    assert res.returncode == 0, res.stderr

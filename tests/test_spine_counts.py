"""The counts issue 28 judges the typed spine by (scripts/spine_counts.py) hold where they are met,
and do not grow back where they are not yet."""

from __future__ import annotations

import runpy

from support.components import REPO

counts = runpy.run_path(str(REPO / "scripts" / "spine_counts.py"))["counts"]
slurm_calls = runpy.run_path(str(REPO / "scripts" / "spine_counts.py"))["slurm_calls"]


def test_records_and_slurm_are_read_and_driven_in_one_place_each():
    got = {name: total for name, (total, _) in counts().items()}
    assert got['rec["…"] outside the store and RunDir'] == 0
    assert got["PAGES_FILE outside RunDir"] == 0
    assert got["files besides cluster/slurm/jobs.py driving a SLURM command"] == 0
    assert got["dict[str, Any]"] < 120  # was 332 when issue 28 was filed


def test_an_engine_is_named_in_its_own_files_only():
    """Issue 28: the auto rule, the settings key, the CLI's choices and the worker name no engine;
    the engines' own files do (and their helpers: Tesseract's language data and OSD, RapidOCR's
    line classifier, which finds its model in the rapidocr wheel), and the SLURM job's list of
    packages whose versions it logs (a distribution's name, not a rule)."""
    _, where = counts()["files naming an OCR engine"]
    assert set(where) <= {"engines/rapidocr.py", "engines/tesseract.py", "languages.py", "engines/osd.py",
                          "engines/upright.py", "cluster/slurm/__main__.py"}, where


def test_the_slurm_count_sees_calls_and_argvs_not_prose():
    code = ('job = sbatch(script)\n'
            'subprocess.run(["scancel", job])\n'
            'ok, out = scontrol_release(ids)\n'
            'help = "start it with `scontrol release JOB`"  # sbatch in a comment\n'
            'print(result["sbatch"])\n')
    assert slurm_calls(code) == 3

"""`vlmocr grid`: the same sample read under several settings, scored and ranked."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli
from support.documents import make_scan_pdf
from support.runs import write_truth_csv
from vlmocr.evaluation import TruthPage, cell_name, grid_cells, sample_truth


def test_grid_cells_and_sample():
    cells = grid_cells({"dpi": [100.0, 200.0], "engine": ["tesseract", "rapidocr"], "lang": []})
    assert cells == [{"engine": "tesseract", "dpi": 100.0}, {"engine": "tesseract", "dpi": 200.0},
                     {"engine": "rapidocr", "dpi": 100.0}, {"engine": "rapidocr", "dpi": 200.0}]
    assert cell_name(cells[1]) == "engine-tesseract_dpi-200" and cell_name({}) == "default"
    truth = [TruthPage(f"d{i:02d}", 1, "x") for i in range(10)]
    assert [t.doc_id for t in sample_truth(truth, 3)] == ["d01", "d05", "d08"]
    assert sample_truth(truth, None) == truth


@pytest.mark.tesseract
def test_grid_reads_ranks_and_resumes(tmp_path, tesseract):
    lines = [["The harbour master wrote", "to the Committee in June,", "asking for 42 more boats."],
             ["Nobody answered his letter", "until the winter of 1938,", "when the river froze over."]]
    pdf = make_scan_pdf(tmp_path / "s.pdf", lines)
    truth = write_truth_csv(tmp_path / "t.csv", [("s", i, "", "\n".join(ls)) for i, ls in enumerate(lines, 1)])
    out = tmp_path / "grid"
    args = ("grid", str(pdf), "--truth", str(truth), "--out", str(out), "--engine", "tesseract", "--dpi", "40,100",
            "--workers", "2", "--json")
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [c["rank"] for c in data["cells"]] == [1, 2]
    assert {c["name"] for c in data["cells"]} == {"engine-tesseract_dpi-40", "engine-tesseract_dpi-100"}
    cers = [c["corpus"]["cer"] for c in data["cells"]]
    assert cers == sorted(cers) and cers[0] < 0.02
    assert all(c["corpus"]["scored"] == 2 and c["corpus"]["missing"] == 0 for c in data["cells"])
    assert json.loads((out / "grid.json").read_text())["cells"] == data["cells"]
    before = {c["name"]: (out / c["name"] / "pages.jsonl").read_bytes() for c in data["cells"]}
    # each cell is a run directory: running the grid again reads nothing
    again = run_cli(*args)
    assert again.returncode == 0
    assert {c["name"]: (out / c["name"] / "pages.jsonl").read_bytes() for c in data["cells"]} == before
    assert [c["corpus"] for c in json.loads(again.stdout)["cells"]] == [c["corpus"] for c in data["cells"]]

"""Issue 26, point 4: the evaluate and compare tables fit an 80-column terminal with every figure
whole (rich had cut `1.75–6.06` to `1.75…`); long document names wrap instead of the numbers."""

from __future__ import annotations

from support.cli import run_cli
from support.runs import write_run, write_truth_csv

LONG = "Landesarchiv_Baden-Wuerttemberg_Generallandesarchiv_Karlsruhe_1897"
TRUTH = [(LONG, 1, "fraktur-print", "Der Hauptmann befahl den Abmarsch der Kompanie am Morgen."),
         (LONG, 2, "fraktur-print", "Die Brücke über den Rhein war in der Nacht gesprengt worden."),
         ("letter", 1, "typescript", "Dear Sir, thank you for the books which arrived on Monday.")]
READ_A = ["Der Hauptmaun befahl den Abmarsch der Kompanie am Morgen.",
          "Die Brucke über den Rhein war in der Nacbt gesprengt worden.",
          "Dear Sir, thank you for the books which arived on Monday."]
READ_B = ["Der Hauptmann befahl den Abmarsch der Kompagnie am Morgen.",
          "Die Brücke uber den Rbein war in der Nacht gesprengt worden.",
          "Dear Sir, thank yon for the hooks which arrived on Monday."]


def runs(tmp_path):
    a = write_run(tmp_path / "a", [(d, p, "ok", t) for (d, p, _, _), t in zip(TRUTH, READ_A)])
    b = write_run(tmp_path / "b", [(d, p, "ok", t) for (d, p, _, _), t in zip(TRUTH, READ_B)])
    truth = write_truth_csv(tmp_path / "truth.csv", TRUTH)
    return a, b, truth


# The closing summary lines are prose printed whole (soft-wrapped by the terminal, kept one
# line for grep); every line of a table fits.
PROSE = ("CER ", "Compared ", "Twins ")


def check_fits(out: str, width: int) -> None:
    assert out.strip()
    too_long = [line for line in out.splitlines() if len(line) > width and not line.startswith(PROSE)]
    assert not too_long, too_long
    assert "…" not in out, out


def test_evaluate_fits_80_columns_with_whole_figures(tmp_path):
    a, _, truth = runs(tmp_path)
    proc = run_cli("evaluate", str(a), "--truth", str(truth), "--docs", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    check_fits(proc.stdout, 80)
    assert "CER" in proc.stdout and "95 % CI" in proc.stdout and "fraktur-print" in proc.stdout
    # The confidence interval the summary line gives stands whole in the table's "all" row.
    lines = proc.stdout.splitlines()
    summary = next(line for line in lines if line.startswith("CER "))
    ci = summary.split("[", 1)[1].split("]", 1)[0]
    (all_row,) = [line for line in lines if line.split()[:1] == ["all"]]
    assert ci in all_row.split() and LONG[:30] in proc.stdout
    header = next(line for line in lines if line.split()[:2] == ["set", "pages"])
    assert "macro" not in header
    # A wider terminal also gets the macro rates.
    wide = run_cli("evaluate", str(a), "--truth", str(truth), env={"COLUMNS": "120"})
    check_fits(wide.stdout, 120)
    header = next(line for line in wide.stdout.splitlines() if line.split()[:2] == ["set", "pages"])
    assert header.split().count("macro") == 2


def test_compare_fits_80_columns(tmp_path):
    a, b, truth = runs(tmp_path)
    proc = run_cli("compare", str(a), str(b), "--raw", "--truth", str(truth), env={"COLUMNS": "80"})
    # B reads differently from A by design (the rows to show): the twins disagree, exit 4.
    assert proc.returncode == 4, proc.stderr
    check_fits(proc.stdout, 80)
    assert "A vs B" in proc.stdout and "letter" in proc.stdout

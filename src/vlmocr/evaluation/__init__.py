"""Measured quality: ground truth (`truth`), scores and gates (`score`), two runs compared
(`compare`), and the grid of settings ranked on a sample (`grid`)."""

from .compare import Comparison, PageDiff, Verdict, compare_records, compare_runs
from .grid import GRID_AXES, GridCell, cell_name, grid_cells, rank_cells, sample_truth
from .score import (
    BOOTSTRAP,
    FOLDS,
    METRICS,
    SEED,
    Aggregate,
    Evaluation,
    Gate,
    GateResult,
    PageScore,
    aggregate,
    bootstrap_ci,
    cer,
    char_errors,
    check_gate,
    check_gates,
    distances,
    evaluate_run,
    normalize,
    parse_gate,
    rate,
    run_records,
    score,
)
from .truth import TruthPage, load_truth, match_truth

__all__ = [
    "BOOTSTRAP", "FOLDS", "GRID_AXES", "METRICS", "SEED",
    "Aggregate", "Comparison", "Evaluation", "Gate", "GateResult", "GridCell", "PageDiff", "PageScore", "TruthPage",
    "Verdict",
    "aggregate", "bootstrap_ci", "cell_name", "cer", "char_errors", "check_gate", "check_gates", "compare_records",
    "compare_runs", "distances", "evaluate_run", "grid_cells", "load_truth", "match_truth", "normalize",
    "parse_gate", "rank_cells", "rate", "run_records", "sample_truth", "score",
]

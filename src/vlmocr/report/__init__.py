"""The static HTML report of a run (`vlmocr report`); see `build.py` for the layout."""

from .build import FLAGGED_STATUSES, ReportOptions, ReportResult, build_report, diff_ops

__all__ = ["FLAGGED_STATUSES", "ReportOptions", "ReportResult", "build_report", "diff_ops"]

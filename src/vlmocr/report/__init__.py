"""The static HTML report of a run (`vlmocr report`). build.py runs one build through gather,
review, thumbs, site (the output folder and its layout) and html_pages; svg.py draws the charts."""

from .build import ReportResult, build_report
from .diff import diff_ops
from .gather import ReportOptions
from .review import FLAGGED_STATUSES

__all__ = ["FLAGGED_STATUSES", "ReportOptions", "ReportResult", "build_report", "diff_ops"]

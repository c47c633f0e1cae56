"""Figures: find them in grounded page records and crop them (find), describe them with a VLM
through the page reader (describe), and put the descriptions where the figures sit in the page
text and exports (placement)."""

from .describe import DescribeSummary, describe_run
from .find import FIGURE_TYPES, Figure, crop_page, crop_path, find_figures, is_figure_block, normalize_bbox, \
    page_figures, pixel_boxes
from .placement import FigureRef, add_figures, alt_text, apply_descriptions, figure_markdown, figures_by_page, \
    page_figure_fields, with_figures
from .settings import DEFAULT_PROMPT, DescribeOptions
from ..rundir import FIGURES_FILE

__all__ = [
    "DEFAULT_PROMPT", "FIGURES_FILE", "FIGURE_TYPES", "DescribeOptions", "DescribeSummary", "Figure", "FigureRef",
    "add_figures", "alt_text", "apply_descriptions", "crop_page", "crop_path", "describe_run", "figure_markdown",
    "figures_by_page", "find_figures", "is_figure_block", "normalize_bbox", "page_figure_fields", "page_figures",
    "pixel_boxes", "with_figures",
]

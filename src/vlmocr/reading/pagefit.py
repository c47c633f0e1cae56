"""How many pages fit one multi-page request, by the context estimate, and at what size N would.

The estimate is the one the VLM reader packs requests by: one image token per 28×28 patch
(Qwen-style ViTs), the page's answer budget (the profile's max_tokens) and a little for the
prompt. When it sends fewer pages per request than asked, the reader says so once and names the
size at which the pages asked for would fit: the dpi for pages rendered from a PDF or DjVu, the
longest side for image files (which are read at their own size, so --dpi does not shrink them)."""

from __future__ import annotations

from collections.abc import Sequence

PATCH = 28
PROMPT_TOKENS = 64  # per page: the prompt's share and the chat template's tokens


def image_tokens(width: int, height: int) -> int:
    return -(-width // PATCH) * -(-height // PATCH)


def page_cost(width: int, height: int, answer: int) -> int:
    """Tokens one page takes of the context: its image, its answer budget, its prompt share."""
    return image_tokens(width, height) + answer + PROMPT_TOKENS


def _scaled(sizes: Sequence[tuple[int, int]], factor: float) -> list[tuple[int, int]]:
    return [(max(1, round(w * factor)), max(1, round(h * factor))) for w, h in sizes]


def largest_fitting(sizes: Sequence[tuple[int, int]], current: int, budget: int, answer: int) -> int | None:
    """The largest whole size below ``current`` (a dpi, or a longest side in pixels) at which all
    ``sizes`` (pixels at ``current``) fit ``budget`` together; None when none does (their answer
    budgets alone fill it)."""
    for target in range(current - 1, 0, -1):
        if sum(page_cost(w, h, answer) for w, h in _scaled(sizes, target / current)) <= budget:
            return target
    return None


def fit_note(asked: int, sizes: Sequence[tuple[int, int]], fit: int, budget: int, answer: int, *,
             dpi: float | None, by_dpi: bool, budget_from: str) -> str:
    """The one line said when the estimate sends ``fit`` pages per request instead of ``asked``
    (``sizes``: the pages' pixels as rendered, at ``dpi`` when known)."""
    w, h = max(sizes, key=lambda s: s[0] * s[1])
    at = f"at {dpi:g} dpi" if by_dpi and dpi else f"at {w}×{h} px"
    head = (f"--pages-per-request {asked}: {at} a page costs ~{image_tokens(w, h):,} image tokens + {answer:,} "
            f"for its answer, so {fit} page{'s' if fit != 1 else ''} per request fit{'s' if fit == 1 else ''} "
            f"the {budget:,}-token context ({budget_from}), not {asked}")
    if by_dpi and dpi:
        target = largest_fitting(sizes, int(dpi), budget, answer)
        hint = f"{asked} pages fit at {target} dpi or less (--dpi {target})" if target else None
    else:
        target = largest_fitting(sizes, max(w, h), budget, answer)
        hint = (f"{asked} pages fit at a longest side of {target} px or less (--longest-side {target})"
                if target else None)
    if hint is None:
        most = max(1, (budget - 1) // (answer + PROMPT_TOKENS + 1))
        hint = (f"their answers alone ({asked} × {answer:,} tokens) fill it at any size: "
                f"--pages-per-request {min(most, asked - 1)} at most")
    return f"{head}; {hint}"


__all__ = ["fit_note", "image_tokens", "largest_fitting", "page_cost"]

"""The review queues: which pages a person should look at, and why."""

from __future__ import annotations

from .gather import Page

# Every status but ok puts a page in the review queue; so does a CER above the threshold.
FLAGGED_STATUSES: tuple[str, ...] = ("loop", "truncated", "empty", "suspect", "fallback", "refused", "error",
                                     "bad_input")
QUEUE_NAMES: tuple[str, ...] = ("all", *FLAGGED_STATUSES, "cer")


def review_queues(pages: list[Page], cer_threshold: float) -> dict[str, list[Page]]:
    """Queue name → its pages in document order. Sets each flagged page's reasons and its
    ordinal, its place in the "all" queue."""
    queues: dict[str, list[Page]] = {q: [] for q in QUEUE_NAMES}
    for p in pages:
        if p.status in FLAGGED_STATUSES:
            p.reasons.append(p.status)
        if p.cer is not None and p.cer > cer_threshold:
            p.reasons.append("cer")
        if p.reasons:
            p.ordinal = len(queues["all"])
            queues["all"].append(p)
            for reason in p.reasons:
                queues[reason].append(p)
    return queues


def queue_label(q: str, threshold: float) -> str:
    return f"CER > {threshold * 100:g} %" if q == "cer" else q

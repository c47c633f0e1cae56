"""The status of a reading: ok, a loop, truncated, empty or a refusal, and its flags.

A vision-language model fails on a page in a handful of recognisable ways: it loops (dot
leaders running to `max_tokens`, one table row emitted fifty times, the page re-emitted from
the top, a numbered list counting on with the same content), it stops at `max_tokens`, it
answers nothing, or it answers *about* the page instead of reading it ("I'm sorry, but I
can't…", "The image contains no text."). `classify` turns a reading into one status and a
list of flags, with the detectors of `loops` (repetition) and `nonanswers` (empty, no-text and
refusal answers).

Precedence of `classify` (the first rule that applies wins; flags record the others):

1. **empty** — no visible text. With `blank_image=True` the page really is blank: status
   ok, flag ``blank_page``. An answer that only says there is no text ("The image is
   blank.") counts as empty too, flag ``no_text_answer``.
2. **refused** — `finish_reason == "content_filter"` (the server withheld the content), or a
   short answer that is mostly a refusal ("I'm sorry, but I can't assist…", "As an AI…",
   in several languages). Long texts are never refusals: a letter that says "I am sorry"
   is content.
3. **loop** — `detect_loop` found a loop, or vLLM's repetition detector stopped the
   generation (`finish_reason == "repetition"`, flag ``finish_repetition``): that detector
   only fires when the model repeated itself, so the text is a loop even if the copies left
   in it are too few for `detect_loop`. Loop beats truncated: when a loop ran the output to
   `max_tokens` the cause is the loop (retry with repetition controls, not a larger budget),
   and the flag ``finish_length`` records the length stop as well.
4. **truncated** — `finish_reason == "length"` without a loop (flag ``finish_length``).
5. **suspect** — text read from an image the caller measured as blank (no ink: flag
   ``text_on_blank_image``): the image says there is nothing to read, so the text was made up
   (a VLM's fluent passage on a blank page, the failure users report most). Never `ok`: it goes
   up a VLM's retry ladder and to review.
6. **ok**.
"""

from __future__ import annotations

from dataclasses import dataclass

from vlmocr.runfolder.record import Status

from ..runfolder.flags import Flag
from .loops import LoopFinding, detect_loop
from .nonanswers import is_empty, is_no_text_answer, is_refusal

# --------------------------------------------------------------------------------------------
# Flags (strings stored in the page record's `flags`)

FLAG_BLANK_PAGE = Flag.blank_page.of()  # empty reading of an image known to be blank: fine
FLAG_NO_TEXT_ANSWER = Flag.no_text_answer.of()  # the model said there is no text instead of reading
FLAG_TEXT_ON_BLANK = Flag.text_on_blank_image.of()  # text read from an image the caller thinks is blank
FLAG_LOOP = Flag.loop_detected.of()  # detect_loop found repetition in the text
FLAG_FINISH_LENGTH = Flag.finish_length.of()  # generation hit max_tokens
FLAG_FINISH_REPETITION = Flag.finish_repetition.of()  # vLLM's repetition detector stopped generation
FLAG_FINISH_CONTENT_FILTER = Flag.finish_content_filter.of()  # the server withheld the content

# finish_reason values that mean "the model ended its answer normally".
NORMAL_FINISH = frozenset({None, "", "stop", "eos", "eos_token", "end_turn", "stop_sequence"})


@dataclass(frozen=True)
class Assessment:
    status: Status
    flags: list[str]
    loop: LoopFinding | None = None


# --------------------------------------------------------------------------------------------
# Classification


def assess(reading_text: str, finish_reason: str | None, *, blank_image: bool = False) -> Assessment:
    """Status, flags and the loop finding (if any) for one reading; see the module docstring
    for the order of precedence."""
    text = reading_text or ""
    reason = (finish_reason or "").lower() or None
    flags: list[str] = []
    if reason == "length":
        flags.append(FLAG_FINISH_LENGTH)
    elif reason == "repetition":
        flags.append(FLAG_FINISH_REPETITION)
    elif reason == "content_filter":
        flags.append(FLAG_FINISH_CONTENT_FILTER)
    elif reason not in NORMAL_FINISH:
        flags.append(Flag.finish_other.of(reason=reason))

    if reason != "content_filter":
        if is_empty(text):
            if blank_image:
                return Assessment(Status.ok, [FLAG_BLANK_PAGE, *flags])
            return Assessment(Status.empty, flags)
        if is_no_text_answer(text):
            if blank_image:
                return Assessment(Status.ok, [FLAG_BLANK_PAGE, FLAG_NO_TEXT_ANSWER, *flags])
            return Assessment(Status.empty, [FLAG_NO_TEXT_ANSWER, *flags])
    if reason == "content_filter" or is_refusal(text):
        return Assessment(Status.refused, flags)

    if blank_image:
        flags.append(FLAG_TEXT_ON_BLANK)
    finding = detect_loop(text)
    if finding is not None:
        return Assessment(Status.loop, [FLAG_LOOP, *flags], finding)
    if reason == "repetition":
        return Assessment(Status.loop, flags)
    if reason == "length":
        return Assessment(Status.truncated, flags)
    if blank_image:
        return Assessment(Status.suspect, flags)
    return Assessment(Status.ok, flags)


def classify(reading_text: str, finish_reason: str | None, *, blank_image: bool = False) -> tuple[Status, list[str]]:
    """(status, flags) for one reading. Status is a `Status` (a str enum: ``"ok"``, ``"loop"``,
    ``"truncated"``, ``"empty"``, ``"refused"``)."""
    result = assess(reading_text, finish_reason, blank_image=blank_image)
    return result.status, result.flags

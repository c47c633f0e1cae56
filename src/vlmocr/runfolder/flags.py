"""Every flag a page record may carry, once: its form and what it means. Code writes a flag with
`Flag.X.of(...)`; the report and evaluate read one back with `parse_flag` (the flag, its values),
so a flag's wording lives here and nowhere else.

A form is a `str.format` template: `rotated:{turn}` is written `Flag.rotated.of(turn=90)` →
``rotated:90`` and read back as (Flag.rotated, {"turn": "90"}). The forms are those records have
always had (old runs parse too); a new flag is one member here, with its meaning."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class FlagForm:
    form: str  # how it is written: a str.format template
    means: str  # what it says of the page, for a person (the report's legend)
    about: str  # what it belongs to: image | text layer | orientation | reading | answer | vlm | record


class Flag(Enum):
    # The page image (inputs/)
    downscaled = FlagForm("downscaled", "the page image was over the pixel cap (--max-pixels) and was scaled down",
                          "image")
    animated = FlagForm("animated", "frame 1 of an animation was read; its other frames are no pages", "image")
    scaled_16bit = FlagForm("scaled_16bit", "a 16/32-bit or float grey image was stretched to 8 bits", "image")
    alpha_on_white = FlagForm("alpha_on_white", "transparency was put on white paper", "image")
    inverted = FlagForm("inverted", "a negative (light ink on dark) was inverted", "image")
    cleaned = FlagForm("cleaned:{how}", "the scan was cleaned before it was read (--clean)", "image")
    specks_removed = FlagForm("specks_removed:{count}", "specks were removed from the cleaned scan", "image")
    # The PDF's text layer
    textlayer = FlagForm("textlayer", "read from the PDF's own text layer, not from pixels", "text layer")
    textlayer_unusable = FlagForm("textlayer_unusable:{why}", "the PDF's text layer was there but not used",
                                  "text layer")
    no_text_layer = FlagForm("no_text_layer", "the page has no text layer to read", "text layer")
    # How the page lay
    rotated = FlagForm("rotated:{turn}", "the page was turned (degrees counter-clockwise) before it was read",
                       "orientation")
    osd_confidence = FlagForm("osd_confidence:{confidence}", "how sure Tesseract's OSD was of the turn",
                              "orientation")
    lines_turned = FlagForm("lines_turned:{turn}:{score}",
                            "RapidOCR's line classifier found the turn that reads upright", "orientation")
    osd_overruled = FlagForm("osd_overruled:{proposed}>{kept}:{score}",
                             "the line classifier overruled OSD's turn", "orientation")
    turn_not_kept = FlagForm("turn_not_kept:{turn}", "the page read turned was no better: read as it lay",
                             "orientation")
    asked_again_rotated = FlagForm("asked_again_rotated:{turn}",
                                   "the VLM was asked again with the page turned", "orientation")
    rotation_still_invalid = FlagForm("rotation_still_invalid",
                                      "the model still said the page was not upright after one turn", "orientation")
    lines_run_down = FlagForm("lines_run_down", "most letters lie in tall boxes: the page may be on its side",
                              "orientation")
    # A CPU engine's reading
    small_letters = FlagForm("small_letters:{px}", "the letters are small for the engine (pixels high)", "reading")
    local_thresholds = FlagForm("local_thresholds",
                                "read again with local thresholds (Sauvola): the first reading failed its signal",
                                "reading")
    repaired = FlagForm("repaired:{how}", "read again from the scan repaired (despeckle: specks removed; layers: a "
                        "lighter layer of strokes, such as the verso bleeding through, taken out): the first "
                        "reading failed its signal and the repaired one reads better", "reading")
    speckle = FlagForm("speckle:{share}", "the share of the scan's pixels that were specks (salt-and-pepper "
                       "noise): so many that it was despeckled before it was read", "image")
    repair_not_kept = FlagForm("repair_not_kept:{how}", "the scan was repaired and read again after its reading "
                               "failed its signal, and read no better: the reading as scanned kept", "reading")
    side_notes = FlagForm("side_notes", "lines beside the body were read as a block of their own", "reading")
    cjk_punctuation_folded = FlagForm("cjk_punctuation_folded:{count}",
                                      "full-width punctuation folded to the page's script", "reading")
    # The answer's text (text/quality.py)
    blank_page = FlagForm("blank_page", "an empty reading of a page known to be blank: fine", "answer")
    no_text_answer = FlagForm("no_text_answer", "the model said there is no text instead of reading", "answer")
    text_on_blank_image = FlagForm("text_on_blank_image", "text was read from an image that looks blank", "answer")
    loop_detected = FlagForm("loop_detected", "the text repeats itself (a generation loop)", "answer")
    finish_length = FlagForm("finish_length", "the answer hit its token budget (max_tokens)", "answer")
    finish_repetition = FlagForm("finish_repetition", "the server's repetition detector stopped the answer",
                                 "answer")
    finish_content_filter = FlagForm("finish_content_filter", "the server withheld the content", "answer")
    finish_other = FlagForm("finish_{reason}", "the answer ended for a reason the server named", "answer")
    lone_surrogates_replaced = FlagForm("lone_surrogates_replaced",
                                        "characters the answer could not hold (lone surrogates) were replaced",
                                        "answer")
    # Asking a VLM (reading/vlm.py, reading/cascade.py)
    ladder = FlagForm("ladder:{step}", "read on this step of the retry ladder", "vlm")
    http_tries = FlagForm("http_tries:{count}", "HTTP requests this answer took", "vlm")
    answer_fitted_to_context = FlagForm("answer_fitted_to_context",
                                        "the token budget was cut to the room the server's context left", "vlm")
    shrunk_for_context = FlagForm("shrunk_for_context", "the image was shrunk to fit the server's context", "vlm")
    context_overflow = FlagForm("context_overflow", "the request did not fit the server's context", "vlm")
    multipage = FlagForm("multipage:{pages}", "read in one request with other pages", "vlm")
    multipage_failed = FlagForm("multipage_failed", "a request of several pages failed: read alone", "vlm")
    multipage_split_mismatch = FlagForm("multipage_split_mismatch",
                                        "a request of several pages came back in the wrong number of parts: read alone",
                                        "vlm")
    align_failed = FlagForm("align_failed", "the CPU engine could not place the answer's words", "vlm")
    fallback = FlagForm("fallback", "the VLM's answers failed: a CPU engine read the page", "vlm")
    fallback_reason = FlagForm("fallback_reason:{why}", "why the CPU engine read it", "vlm")
    unsupported_by = FlagForm("unsupported_by_{engine}:{share}",
                              "few of the answer's words are in the CPU engine's reading: invented, or another page's",
                              "vlm")
    unsupported_passage_by = FlagForm("unsupported_passage_by_{engine}:{run}",
                                      "a passage of the answer stands opposite nothing in the CPU engine's reading",
                                      "vlm")
    vlm_tier_failed = FlagForm("vlm_tier_failed:{status}", "the VLM tier's answer failed: the CPU reading kept",
                               "vlm")
    vlm_tier_unsupported_by = FlagForm("vlm_tier_unsupported_by_{engine}:{share}",
                                       "the VLM tier's answer was not supported by the CPU reading: the CPU's kept",
                                       "vlm")
    vlm_tier_unsupported_passage_by = FlagForm("vlm_tier_unsupported_passage_by_{engine}:{run}",
                                               "the VLM tier's answer holds a passage the CPU reading does not: "
                                               "the CPU's kept", "vlm")
    # The record itself (runfolder/)
    text_cut = FlagForm("text_cut:{chars}", "the text was longer than a record holds and was cut", "record")
    chars_made_safe = FlagForm("chars_made_safe:{count}",
                               "control or direction characters were made safe for XML and terminals", "record")
    internal_error = FlagForm("internal_error", "vlmocr failed on the page: a bug, reported", "record")

    def of(self, **values: Any) -> str:
        """The flag as a record writes it."""
        return self.value.form.format(**values)

    def found(self, flags: Iterable[str]) -> bool:
        """Does a record's flags hold this flag (with any values)?"""
        return any(parse_flag(f)[0] is self for f in flags)

    def values(self, flags: Iterable[str]) -> dict[str, str] | None:
        """The values of the first of `flags` that is this flag; None when none is."""
        for f in flags:
            flag, values = parse_flag(f)
            if flag is self:
                return values
        return None

    @property
    def means(self) -> str:
        return self.value.means


def _pattern(form: str) -> re.Pattern[str]:
    out, pos = [], 0
    for m in re.finditer(r"\{(\w+)(?::[^}]*)?\}", form):
        out.append(re.escape(form[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>.+?)")
        pos = m.end()
    out.append(re.escape(form[pos:]))
    return re.compile("".join(out) + r"\Z")


# Fixed forms before the templates: `finish_length` is itself, not finish_{reason} of "length".
_PATTERNS = sorted(((flag, _pattern(flag.value.form)) for flag in Flag),
                   key=lambda fp: ("{" in fp[0].value.form, -len(fp[0].value.form.split("{")[0])))


@lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[Flag | None, tuple[tuple[str, str], ...]]:
    for flag, pattern in _PATTERNS:
        m = pattern.match(text)
        if m:
            return flag, tuple(m.groupdict().items())
    return None, ()


def parse_flag(text: str) -> tuple[Flag | None, dict[str, str]]:
    """(the flag, its values) of a flag as a record holds it; (None, {}) for one not in the
    vocabulary (a newer vlmocr's, or a record written by hand)."""
    flag, values = _parse(str(text))
    return flag, dict(values)


def flag_name(text: str) -> str:
    """The flag's name for tallies: `rotated` for ``rotated:90``; the text before its first ``:``
    for a flag not in the vocabulary."""
    flag, _ = parse_flag(text)
    return flag.name if flag is not None else str(text).split(":", 1)[0]

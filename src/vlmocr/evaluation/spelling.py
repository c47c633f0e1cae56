"""A spelling count without ground truth: the share of a run's words that are not in a real word
list of their page's language.

Seed 000's gate "knows nothing about CER thresholds or spelling counts": a pilot where nobody has
typed truth still has to be gated. The word lists are the `wordfreq` package's (text/textquality.py:
shipped inside the wheel, so it works offline; inflected forms included), the language is each
page's own (its record, the manifest's, --lang, else guessed from its stopwords), and a page whose
language has no word list is counted apart, never as all-unknown. As a gate metric it is
``unknown_words`` (`evaluate --gate 'unknown_words<=0.08'`, with or without --truth; `slurm gate
--require 'unknown_words<=0.08'`, with or without --truth): corpus or ``doc:NAME:`` scope."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..runfolder.record import JsonObject, Row

NO_TRUTH_METRICS = ("unknown_words",)


@dataclass
class Spelling:
    """Words and unknown words over the pages that have a word list for their language."""

    pages: int = 0
    judged: int = 0  # pages whose language has a word list and that have words
    words: int = 0
    unknown: int = 0
    languages: Counter[str] = field(default_factory=Counter)

    @property
    def unknown_words(self) -> float | None:
        return self.unknown / self.words if self.words else None

    def as_dict(self) -> JsonObject:
        return {"pages": self.pages, "judged": self.judged, "words": self.words, "unknown": self.unknown,
                "unknown_words": self.unknown_words, "languages": dict(sorted(self.languages.items()))}


def measure_spelling(records: Mapping[tuple[str, int], Row],
                     lang: str | None = None) -> dict[str, Spelling]:
    """{"corpus": …, "doc:NAME": …} over the final records (page 0, a document that never opened,
    has no words). ``lang``: the language of pages whose record names none."""
    from ..text.textquality import assess_page

    out: dict[str, Spelling] = {"corpus": Spelling()}
    for (doc_id, page), rec in sorted(records.items()):
        if page <= 0:
            continue
        # The language the page was judged in when it was read (its quality signal's), unless given.
        judged_in = rec.quality.language if rec.quality else None
        q = assess_page(rec, lang=lang or judged_in)
        for key in ("corpus", f"doc:{doc_id}"):
            s = out.setdefault(key, Spelling())
            s.pages += 1
            s.languages[q.language or "none"] += 1
            if q.known_share is not None:
                s.judged += 1
                s.words += q.words
                s.unknown += q.words - q.known
    return out

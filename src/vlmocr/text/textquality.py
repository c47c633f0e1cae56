"""Quality without ground truth: how much of a page reads as words of its language.

Two measures per page, both shares between 0 and 1:

* **known words** — the share of word tokens (two letters or more) found in a word list for the
  page's language. Real OCR of a clean page of prose scores 0.85–0.98; a page read as the wrong
  script, a garbled scan or a hallucination scores far lower. The word lists come from the
  `wordfreq` package (its data ships inside the wheel, so it works offline): every word with a
  frequency of at least about one in a hundred million in its corpora, inflected forms included,
  which a hunspell ``.dic`` without its affix engine would miss.
* **implausible characters** — the share of non-space characters that a page in that language
  should not contain: control and private-use characters, U+FFFD, unassigned code points, and
  letters of another script (Cyrillic or CJK in a German page, say).

A page is **suspicious** when it has enough words to judge and too few are known, or when too
many of its characters are implausible (thresholds below, overridable). The language of a page
is its record's ``fields.language`` (models such as olmOCR report it), else the language given
by the caller, else the Tesseract language in the record's model name, else a guess from
stopword overlap.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from ..runfolder.record import JsonObject, Row
from .cjk_punctuation import is_cjk_punctuation

# A page needs this many word tokens before its known-word share means anything: a caption or a
# page number alone is not suspicious.
MIN_WORDS = 20
# Known-word share below which a page is suspicious. Tesseract on the typewritten and Fraktur
# development pages (CER 3-10 %) stays above 0.75; a page read in the wrong language or
# script, or mostly noise, falls below 0.5.
MIN_KNOWN = 0.6
# Share of implausible characters above which a page is suspicious: one in fifty. A clean page
# has none; a stray symbol or two on a long page stays far below.
MAX_IMPLAUSIBLE = 0.02

# A word: letters (any script, combining marks included), joined by apostrophes or hyphens.
_LETTERS = r"[^\W\d_]+"
WORD_RE = re.compile(rf"{_LETTERS}(?:['’\-]{_LETTERS})*")

# ISO 639-1/639-2/639-3 codes, Tesseract names and English names → the wordfreq code.
_LANG_ALIASES: dict[str, str] = {}
for _code, _names in {
    "en": "eng english",
    "de": "deu ger german deutsch frk",
    "fr": "fra fre french français francais",
    "cs": "ces cze czech čeština cestina",
    "da": "dan danish dansk",
    "el": "ell gre greek modern_greek",
    "grc": "ancient_greek polytonic_greek",
    "nl": "nld dut dutch",
    "es": "spa spanish español",
    "it": "ita italian italiano",
    "pl": "pol polish polski",
    "pt": "por portuguese português",
    "sv": "swe swedish svenska",
    "nb": "nor nob no norwegian",
    "fi": "fin finnish",
    "hu": "hun hungarian",
    "ru": "rus russian",
    "uk": "ukr ukrainian",
    "sk": "slk slo slovak",
    "sl": "slv slovenian",
    "hr": "hrv croatian",
    "ro": "ron rum romanian",
    "tr": "tur turkish",
    "ca": "cat catalan",
    "lt": "lit lithuanian",
    "lv": "lav latvian",
    "bg": "bul bulgarian",
}.items():
    _LANG_ALIASES[_code] = _code
    for _name in _names.split():
        _LANG_ALIASES[_name] = _code

# Scripts a page in each language may use. Latin is allowed everywhere (names, abbreviations,
# quotations); Greek development pages carry a Latin apparatus.
_SCRIPTS: dict[str, frozenset[str]] = {
    "el": frozenset({"GREEK", "LATIN"}),
    "grc": frozenset({"GREEK", "LATIN"}),
    "ru": frozenset({"CYRILLIC", "LATIN"}),
    "uk": frozenset({"CYRILLIC", "LATIN"}),
    "bg": frozenset({"CYRILLIC", "LATIN"}),
}
_DEFAULT_SCRIPTS = frozenset({"LATIN"})
_CJK_SCRIPTS = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL"})
_SCRIPT_NAMES = ("LATIN", "GREEK", "CYRILLIC", "ARMENIAN", "HEBREW", "ARABIC", "DEVANAGARI", "THAI", "GEORGIAN",
                 "HANGUL", "HIRAGANA", "KATAKANA", "CJK", "ETHIOPIC", "TIBETAN", "COPTIC", "RUNIC")

# A few dozen of the most frequent function words per language: enough to tell the languages
# of a corpus apart from a page of text, small enough to keep in the source.
STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the of and to in a is that for it as was with be by on not he i this are or his from at which but "
              "have an they you were her she there been their all we would will has its had who our than",
        "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden "
              "aus er hat daß dass sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur "
              "oder aber vor zur bis mehr durch man",
        "fr": "de la le et les des en du un une que est pour qui dans a par plus pas au sur ne se il elle ce sont "
              "avec son sa ses nous vous ont été cette leur aux mais ou je",
        "cs": "a se na je v že to s z do o k i jako by pro ale jsem jak které který tak jeho za podle jen než "
              "už by byl byla bylo jsou od při po ve ze také aby",
        "da": "og i at det er en til på den som de med af for ikke der var han har sig et fra vi men om kan "
              "være eller blev efter hans hun skal have også",
        "el": "και το να του η με την της για ο που τα από σε δεν θα τον είναι στο οι των τους τη ως στην",
        "grc": "καὶ τὸ τοῦ τὴν τῆς τῶν τὸν ὁ ἡ οἱ αἱ τὰ τῷ ἐν δὲ γὰρ μὲν ὡς ἐπὶ πρὸς εἰς ἀπὸ ἐκ ἐξ οὐ οὐκ "
               "αὐτοῦ αὐτὸν αὐτῷ ὑπὸ διὰ κατὰ μετὰ παρὰ περὶ ἦν",
        "nl": "de en van het een in is dat op te zijn met voor niet aan er die als ook door maar om",
        "es": "de la que el en y los del se las por un para con no una su al es lo como más pero sus le",
        "it": "di e il la che in a per un è del non una sono le con si da lo dei della al ma come",
        "sv": "och i att det som en på är av för med till den har de inte om ett han men var jag sig",
        "pl": "i w na z że się do nie to jest o jak co po a przez od za tak jego czy",
        "la": "et in est non ad cum quod qui quae ut sed esse de per ex se enim si ab nec autem",
    }.items()
}


# Languages checked against the word list of a related one, with a lower bar: polytonic Greek
# against modern Greek (accents folded) knows about half the words of a correct page.
_WORDLIST = {"grc": "el"}
_MIN_KNOWN_FACTOR = {"grc": 0.5}


def wordfreq_code(lang: str | None) -> str | None:
    """The canonical language code for a code or name ('deu', 'de', 'German', 'deu+eng' → 'de')."""
    if not lang:
        return None
    first = re.split(r"[+,;\s]+", str(lang).strip().lower())[0]
    first = first.split("-")[0].split("_")[0] if first not in _LANG_ALIASES else first
    return _LANG_ALIASES.get(first)


def _fold_marks(word: str) -> str:
    """Drop combining marks: polytonic Greek looked up in a monotonic word list."""
    return unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", word)
                                                if not unicodedata.combining(c)))


def lookup_form(word: str) -> str:
    # wordfreq stores casefolded NFC words (ß → ss, final ς → σ); long s is an old glyph of s.
    return unicodedata.normalize("NFC", word.replace("ſ", "s").replace("’", "'")).casefold()


class Lexicon:
    """The word list of one language with each word's frequency; lookups casefold the word."""

    def __init__(self, lang: str, freqs: dict[str, float], fold_marks: bool = False) -> None:
        self.lang = lang
        self.fold_marks = fold_marks
        if fold_marks:
            folded: dict[str, float] = {}
            for w, f in freqs.items():
                k = _fold_marks(w)
                folded[k] = folded.get(k, 0.0) + f
            freqs = folded
        self.freqs = freqs

    def _key(self, word: str) -> str:
        key = lookup_form(word)
        return _fold_marks(key) if self.fold_marks else key

    def freq(self, word: str) -> float:
        """The word's frequency (0 when it is not listed); a hyphenated word is not looked up
        as a whole (wordfreq lists none)."""
        return self.freqs.get(self._key(word), 0.0)

    def known(self, word: str) -> bool:
        key = self._key(word)
        if key in self.freqs:
            return True
        # wordfreq splits on hyphens and apostrophes: "well-known" is known when its parts are,
        # "l'homme" when "homme" is.
        parts = [p for p in re.split(r"['\-]", key) if p]
        return len(parts) > 1 and all(p in self.freqs or len(p) == 1 for p in parts)

    def __contains__(self, word: str) -> bool:
        return self.known(word)


@lru_cache(maxsize=16)
def lexicon(lang: str | None) -> Lexicon | None:
    """The word list for a language (any alias), or None when there is none."""
    code = wordfreq_code(lang)
    if code is None:
        return None
    listed = _WORDLIST.get(code, code)
    try:
        import wordfreq
    except ImportError:  # pragma: no cover - wordfreq is a dependency
        return None
    try:
        freqs = wordfreq.get_frequency_dict(listed, wordlist="best")
    except (LookupError, ValueError):
        return None
    if not freqs:
        return None
    # Greek word lists are modern (monotonic); fold accents so polytonic text can be checked.
    return Lexicon(code, freqs, fold_marks=(listed == "el"))


def words_of(text: str) -> list[str]:
    """Word tokens of two letters or more."""
    return [w for w in WORD_RE.findall(text) if len(w) >= 2]


def language_shares(text: str) -> dict[str, float]:
    """For each language with a stopword list, the share of the text's tokens that are its
    stopwords ({} for a text of fewer than five tokens)."""
    tokens = [lookup_form(w) for w in WORD_RE.findall(text[:20000])]
    if len(tokens) < 5:
        return {}
    counts = Counter(tokens)
    return {lang: sum(n for w, n in counts.items() if w in stops) / len(tokens) for lang, stops in STOPWORDS.items()}


def other_language(text: str, expected: Iterable[str]) -> str | None:
    """The language the text is mostly in when that is clearly none of ``expected`` (wordfreq
    codes): its stopwords cover at least 15 % of the tokens and twice what any expected language's
    cover. A translation passes every other measure as a fluent reading."""
    wanted = {code for code in expected if code}
    shares = language_shares(text)
    if not wanted or not shares or not any(code in STOPWORDS for code in wanted):
        return None
    best = max(shares, key=lambda k: shares[k])
    if best in wanted or shares[best] < 0.15:
        return None
    return best if shares[best] >= 2 * max(shares.get(code, 0.0) for code in wanted) else None


def guess_language(text: str, candidates: Iterable[str] | None = None) -> str | None:
    """The language (a wordfreq code) whose stopwords cover most tokens; None when no language
    covers at least 5 % of them (too little text, or a language without a stopword list)."""
    best, best_share = None, 0.0
    for lang, share in language_shares(text).items():
        if candidates is not None and lang not in candidates:
            continue
        if share > best_share:
            best, best_share = lang, share
    return best if best_share >= 0.05 else None


def _script(ch: str) -> str | None:
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return None
    for script in _SCRIPT_NAMES:
        if name.startswith(script):
            return script
    return None


def implausible_chars(text: str, lang: str | None) -> list[str]:
    """The characters of `text` a page in `lang` should not contain (with repetitions)."""
    allowed = _SCRIPTS.get(wordfreq_code(lang) or "", _DEFAULT_SCRIPTS)
    bad: list[str] = []
    for ch in text:
        if ch.isspace():
            continue
        cat = unicodedata.category(ch)
        if ch == "\ufffd" or cat in ("Cc", "Co", "Cn", "Cs"):
            bad.append(ch)
        elif not allowed & _CJK_SCRIPTS and is_cjk_punctuation(ch):
            bad.append(ch)  # RapidOCR's `。` for a full stop on a Latin page (text/cjk_punctuation.py)
        elif cat.startswith("L") and not ch.isascii():
            script = _script(ch)
            if script is not None and script not in allowed:
                bad.append(ch)
    return bad


@dataclass
class PageQuality:
    doc_id: str
    page: int
    status: str
    language: str | None  # the wordfreq code used, None when unknown
    language_from: str  # record | option | model | guess | none
    chars: int  # non-space characters
    words: int
    known: int
    known_share: float | None  # None when the page has no word list or no words
    implausible: int
    implausible_share: float
    implausible_sample: str  # a few of the implausible characters, for a person to look at
    suspicious: bool = False
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        return asdict(self)


def _record_language(rec: Row) -> str | None:
    lang = rec.fields.get("language") if rec.fields else None
    return str(lang) if lang else None


def _model_language(rec: Row) -> str | None:
    model = rec.model or ""
    if model.startswith("tesseract:"):
        return model.split(":", 1)[1]
    return None


def page_language(rec: Row, default: str | None = None) -> tuple[str | None, str]:
    """(wordfreq code or None, where it came from) for one record."""
    for origin, value in (("record", _record_language(rec)), ("option", default), ("model", _model_language(rec))):
        code = wordfreq_code(value)
        if code:
            return code, origin
    guessed = guess_language(rec.text)
    return (guessed, "guess") if guessed else (None, "none")


def assess_text(text: str, lang: str | None, min_words: int = 0) -> tuple[int, int, int, list[str]]:
    """(non-space chars, words, known words, implausible chars) of a text in `lang`. Under
    `min_words` words the word list is not even loaded (known words 0): loading one costs ~0.2 s
    and ~60 MB, which a short answer (a caption, a blank page's note) should not pay."""
    words = words_of(text)
    lex = lexicon(lang) if lang and len(words) >= min_words else None
    known = sum(1 for w in words if lex.known(w)) if lex else 0
    chars = sum(1 for c in text if not c.isspace())
    return chars, len(words), known, implausible_chars(text, lang)


def assess_page(rec: Row, *, lang: str | None = None, min_words: int = MIN_WORDS,
                min_known: float = MIN_KNOWN, max_implausible: float = MAX_IMPLAUSIBLE) -> PageQuality:
    text = rec.text
    code, origin = page_language(rec, lang)
    lex = lexicon(code) if code else None
    chars, n_words, known, bad = assess_text(text, code)
    known_share = known / n_words if (lex and n_words) else None
    bad_share = len(bad) / chars if chars else 0.0
    q = PageQuality(
        doc_id=rec.doc_id, page=rec.page, status=rec.status.value,
        language=code, language_from=origin, chars=chars, words=n_words,
        known=known, known_share=known_share, implausible=len(bad), implausible_share=bad_share,
        implausible_sample="".join(sorted(set(bad)))[:20],
    )
    bar = min_known * _MIN_KNOWN_FACTOR.get(code or "", 1.0)
    if known_share is not None and n_words >= min_words and known_share < bar:
        q.reasons.append(f"known words {known_share:.0%} < {bar:.0%}")
    if bad_share > max_implausible:
        q.reasons.append(f"implausible characters {bad_share:.1%} > {max_implausible:.1%}")
    if q.status not in ("ok", "fallback", ""):
        q.reasons.append(f"status {q.status}")
    elif chars == 0 and q.page > 0:
        q.reasons.append("no text")
    q.suspicious = bool(q.reasons)
    return q


def assess_records(records: Iterable[Row], **kwargs: Any) -> list[PageQuality]:
    """Quality of every page, sorted by document and page."""
    out = [assess_page(r, **kwargs) for r in records]
    out.sort(key=lambda q: (q.doc_id, q.page))
    return out


def suspicion_rank(q: PageQuality) -> tuple[float, float]:
    """Sort key: the worst pages first (fewest known words, then most implausible chars)."""
    return (q.known_share if q.known_share is not None else 1.0, -q.implausible_share)


def summary(pages: list[PageQuality]) -> dict[str, Any]:
    words = sum(p.words for p in pages if p.known_share is not None)
    known = sum(p.known for p in pages if p.known_share is not None)
    chars = sum(p.chars for p in pages)
    return {
        "pages": len(pages),
        "suspicious": sum(p.suspicious for p in pages),
        "known_share": known / words if words else None,
        "implausible_share": sum(p.implausible for p in pages) / chars if chars else 0.0,
        "languages": dict(sorted(Counter(p.language or "none" for p in pages).items())),
    }

"""Tesseract's language data as data: the names `--lang` accepts, the Debian package that ships
each one, what is installed here, and the script (ISO 15924) each name reads.

One module so that the engine, the settings check, `vlmocr triage` and `--engine auto` give the
same answer: `canonical_lang` (aliases → Tesseract names, at settings time), `resolve_lang`
(names → the data installed here, one-line usage error naming the package to install),
`tesseract_has_language` and `debian_package`.

Names are Tesseract's own (``deu``, ``frk``, ``grc``, ``Fraktur``, ``script/Fraktur``,
``deu+eng``). Aliases, accepted only where they name one data file unambiguously:

* ISO 639-1 codes (``de`` → ``deu``, ``cs`` → ``ces``, ``da`` → ``dan``, ``sk`` → ``slk``) and the
  ISO 639-2/B codes that differ from Tesseract's /T ones (``ger``, ``cze``, ``slo``, ``fre``…).
  ``el`` is Modern Greek (``ell``, monotonic); polytonic Greek has no 639-1 code: ``grc``.
  ``zh`` is left out (Simplified or Traditional?).
* ``fraktur`` → ``frk`` (Debian's "German (Fraktur)" language data; the script model is
  ``Fraktur``, with a capital, as Tesseract spells it). On the Fraktur development pages
  ``frk`` reads better than ``Fraktur`` (BENCHMARKS.md, "Long s and the other historical folds").
* ``script/<Name>`` is tessdata's layout for script models; Debian installs them at the top of
  tessdata (``Fraktur.traineddata``, listed as ``Fraktur``). Either spelling finds either layout.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache

from .exceptions import UsageError

DEBIAN_RELEASE = "Debian 12"

# Language data Debian 12 ships as tesseract-ocr-<name>, '_' written '-' (`apt-cache search
# --names-only '^tesseract-ocr-'`, package tesseract-lang 1:4.1.0-2).
DEBIAN_LANGUAGES = frozenset({
    "afr", "amh", "ara", "asm", "aze", "aze_cyrl", "bel", "ben", "bod", "bos", "bre", "bul", "cat", "ceb",
    "ces", "chi_sim", "chi_sim_vert", "chi_tra", "chi_tra_vert", "chr", "cos", "cym", "dan", "deu", "div",
    "dzo", "ell", "eng", "enm", "epo", "est", "eus", "fao", "fas", "fil", "fin", "fra", "frk", "frm", "fry",
    "gla", "gle", "glg", "grc", "guj", "hat", "heb", "hin", "hrv", "hun", "hye", "iku", "ind", "isl", "ita",
    "ita_old", "jav", "jpn", "jpn_vert", "kan", "kat", "kat_old", "kaz", "khm", "kir", "kmr", "kor",
    "kor_vert", "lao", "lat", "lav", "lit", "ltz", "mal", "mar", "mkd", "mlt", "mon", "mri", "msa", "mya",
    "nep", "nld", "nor", "oci", "ori", "osd", "pan", "pol", "por", "pus", "que", "ron", "rus", "san", "sin",
    "slk", "slv", "snd", "spa", "spa_old", "sqi", "srp", "srp_latn", "sun", "swa", "swe", "syr", "tam",
    "tat", "tel", "tgk", "tha", "tir", "ton", "tur", "uig", "ukr", "urd", "uzb", "uzb_cyrl", "vie", "yid",
    "yor",
})

# Script models (tessdata's script/<Name>): Debian ships each as tesseract-ocr-script-<code>.
DEBIAN_SCRIPTS: dict[str, str] = {
    "Arabic": "arab", "Armenian": "armn", "Bengali": "beng", "Canadian_Aboriginal": "cans",
    "Cherokee": "cher", "Cyrillic": "cyrl", "Devanagari": "deva", "Ethiopic": "ethi", "Fraktur": "frak",
    "Georgian": "geor", "Greek": "grek", "Gujarati": "gujr", "Gurmukhi": "guru", "HanS": "hans",
    "HanS_vert": "hans-vert", "HanT": "hant", "HanT_vert": "hant-vert", "Hangul": "hang",
    "Hangul_vert": "hang-vert", "Hebrew": "hebr", "Japanese": "jpan", "Japanese_vert": "jpan-vert",
    "Kannada": "knda", "Khmer": "khmr", "Lao": "laoo", "Latin": "latn", "Malayalam": "mlym",
    "Myanmar": "mymr", "Oriya": "orya", "Sinhala": "sinh", "Syriac": "syrc", "Tamil": "taml",
    "Telugu": "telu", "Thaana": "thaa", "Thai": "thai", "Tibetan": "tibt", "Vietnamese": "viet",
}

# Data Tesseract's own repositories have but Debian 12 does not package: where to get it.
NOT_PACKAGED: dict[str, str] = {
    "deu_latf": "German Fraktur, 2023, the successor of frk",
}

ALIASES: dict[str, str] = {
    # ISO 639-1 → Tesseract (ISO 639-2/T), for every language Debian packages that has one.
    "af": "afr", "am": "amh", "ar": "ara", "as": "asm", "az": "aze", "be": "bel", "bn": "ben", "bo": "bod",
    "bs": "bos", "br": "bre", "bg": "bul", "ca": "cat", "cs": "ces", "co": "cos", "cy": "cym", "da": "dan",
    "de": "deu", "dv": "div", "dz": "dzo", "el": "ell", "en": "eng", "eo": "epo", "et": "est", "eu": "eus",
    "fo": "fao", "fa": "fas", "fi": "fin", "fr": "fra", "fy": "fry", "gd": "gla", "ga": "gle", "gl": "glg",
    "gu": "guj", "ht": "hat", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun", "hy": "hye", "iu": "iku",
    "id": "ind", "is": "isl", "it": "ita", "jv": "jav", "ja": "jpn", "kn": "kan", "ka": "kat", "kk": "kaz",
    "km": "khm", "ky": "kir", "ko": "kor", "lo": "lao", "la": "lat", "lv": "lav", "lt": "lit", "lb": "ltz",
    "ml": "mal", "mr": "mar", "mk": "mkd", "mt": "mlt", "mn": "mon", "mi": "mri", "ms": "msa", "my": "mya",
    "ne": "nep", "nl": "nld", "no": "nor", "nb": "nor", "oc": "oci", "or": "ori", "pa": "pan", "pl": "pol",
    "pt": "por", "ps": "pus", "qu": "que", "ro": "ron", "ru": "rus", "sa": "san", "si": "sin", "sk": "slk",
    "sl": "slv", "sd": "snd", "es": "spa", "sq": "sqi", "sr": "srp", "su": "sun", "sw": "swa", "sv": "swe",
    "ta": "tam", "tt": "tat", "te": "tel", "tg": "tgk", "th": "tha", "ti": "tir", "to": "ton", "tr": "tur",
    "ug": "uig", "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "yi": "yid", "yo": "yor",
    # ISO 639-2/B codes where they differ from the /T codes Tesseract uses.
    "alb": "sqi", "arm": "hye", "baq": "eus", "bur": "mya", "cze": "ces", "dut": "nld", "fre": "fra",
    "geo": "kat", "ger": "deu", "gre": "ell", "ice": "isl", "mac": "mkd", "mao": "mri", "may": "msa",
    "per": "fas", "rum": "ron", "slo": "slk", "tib": "bod", "wel": "cym",
    "fraktur": "frk",
}

# Names a person may type for a language (`--lang german`): not aliases — Tesseract names its data
# by code, and a run given a name it cannot read by would read every page and judge it by a guess —
# but what "did you mean" suggests when such a name is refused (`unknown_names`).
ENGLISH_NAMES: dict[str, str] = {
    "german": "deu", "english": "eng", "french": "fra", "danish": "dan", "czech": "ces", "dutch": "nld",
    "italian": "ita", "spanish": "spa", "portuguese": "por", "polish": "pol", "swedish": "swe", "norwegian": "nor",
    "finnish": "fin", "hungarian": "hun", "latin": "lat", "greek": "ell", "polytonic": "grc", "russian": "rus",
    "ukrainian": "ukr", "hebrew": "heb", "yiddish": "yid", "arabic": "ara", "turkish": "tur", "slovak": "slk",
    "slovenian": "slv", "croatian": "hrv", "serbian": "srp", "romanian": "ron", "bulgarian": "bul",
    "chinese": "chi_sim", "japanese": "jpn", "korean": "kor", "estonian": "est", "latvian": "lav",
    "lithuanian": "lit", "icelandic": "isl", "irish": "gle", "welsh": "cym", "catalan": "cat", "basque": "eus",
    "deutsch": "deu", "francais": "fra", "dansk": "dan", "cesky": "ces", "czech-fraktur": "frk",
}

# What each name reads (ISO 15924). Names not listed read Latin.
_SCRIPT_OF: dict[str, str] = {
    **{n: "Latf" for n in ("frk", "deu_latf", "Fraktur")},
    **{n: "Grek" for n in ("ell", "grc", "Greek")},
    **{n: "Cyrl" for n in ("rus", "ukr", "bel", "bul", "mkd", "srp", "kaz", "kir", "mon", "tgk", "tat",
                           "aze_cyrl", "uzb_cyrl", "Cyrillic")},
    **{n: "Arab" for n in ("ara", "fas", "pus", "snd", "uig", "urd", "Arabic")},
    **{n: "Hebr" for n in ("heb", "yid", "Hebrew")},
    **{n: "Hans" for n in ("chi_sim", "chi_sim_vert", "HanS", "HanS_vert")},
    **{n: "Hant" for n in ("chi_tra", "chi_tra_vert", "HanT", "HanT_vert")},
    **{n: "Jpan" for n in ("jpn", "jpn_vert", "Japanese", "Japanese_vert")},
    **{n: "Kore" for n in ("kor", "kor_vert", "Hangul", "Hangul_vert")},
    **{n: "Deva" for n in ("hin", "mar", "nep", "san", "Devanagari")},
    **{n: "Thai" for n in ("tha", "Thai")},
    **{n: "Geor" for n in ("kat", "kat_old", "Georgian")},
    **{n: "Armn" for n in ("hye", "Armenian")},
}

# The --lang to suggest for a page of a script whose language is unknown (or has no data of its
# own): Fraktur is mostly German; printed Greek before the 1980s is mostly polytonic.
_SCRIPT_DEFAULT: dict[str, str] = {"Latf": "frk", "Grek": "grc", "Cyrl": "rus", "Arab": "ara", "Hebr": "heb",
                                   "Hans": "chi_sim", "Hant": "chi_tra", "Jpan": "jpn", "Kore": "kor"}

_NAME = re.compile(r"^(?:script/)?[A-Za-z][A-Za-z0-9_]*$")


def split_lang(spec: str) -> list[str]:
    """'deu+eng' → ['deu', 'eng']."""
    return [part.strip() for part in str(spec).split("+")]


def canonical_name(name: str) -> str:
    """One name with its alias resolved ('de' → 'deu'); Tesseract's names are kept as given."""
    return ALIASES.get(name, name)


def canonical_lang(spec: str) -> str:
    """A --lang value with every part's alias resolved ('de+en' → 'deu+eng'). ValueError for a
    value that is no Tesseract language list ('', 'deu eng', 'deu+', '../x')."""
    parts = split_lang(spec)
    bad = [p for p in parts if not _NAME.match(p)]
    if not spec or bad:
        raise ValueError(f"{spec!r} is not a Tesseract language list (names joined by '+', e.g. deu+eng or frk)")
    return "+".join(canonical_name(p) for p in parts)


def script_name(name: str) -> str:
    """'script/Fraktur' → 'Fraktur'; other names unchanged."""
    return name.removeprefix("script/")


def debian_package(name: str) -> str | None:
    """The Debian package that ships one language's data ('frk' → 'tesseract-ocr-frk',
    'script/Fraktur' → 'tesseract-ocr-script-frak'), None when Debian ships none."""
    name = canonical_name(name)
    if name in DEBIAN_LANGUAGES:
        return "tesseract-ocr-" + name.replace("_", "-")
    code = DEBIAN_SCRIPTS.get(script_name(name))
    return f"tesseract-ocr-script-{code}" if code else None


def known_name(name: str) -> bool:
    """A name this module knows (packaged by Debian, or by Tesseract's own repositories)."""
    name = canonical_name(name)
    return name in DEBIAN_LANGUAGES or script_name(name) in DEBIAN_SCRIPTS or name in NOT_PACKAGED


def did_you_mean(name: str) -> str | None:
    """The Tesseract name a mistyped or English language name likely means ('german' → 'deu',
    'Deu' → 'deu', 'deuu' → 'deu'), None without a likely one."""
    import difflib

    low = name.strip().lower()
    if low in ENGLISH_NAMES:
        return ENGLISH_NAMES[low]
    if known_name(low):
        return canonical_name(low)
    names = sorted(DEBIAN_LANGUAGES | set(ENGLISH_NAMES))
    close = difflib.get_close_matches(low, names, n=1, cutoff=0.75)
    return (ENGLISH_NAMES.get(close[0], close[0])) if close else None


def unknown_names(spec: str, installed: frozenset[str] | None = None) -> str | None:
    """Why a language list (canonical: `canonical_lang`) names something no Tesseract reads by —
    one line with what each unknown part likely means — or None when every part is a language
    Debian or tessdata ships, or data installed here."""
    installed = installed_languages() if installed is None else installed
    unknown = [p for p in split_lang(spec) if not known_name(p) and resolve_name(p, installed) is None]
    if not unknown:
        return None
    hints = [f"{p!r}" + (f" (did you mean {guess}?)" if (guess := did_you_mean(p)) else "") for p in unknown]
    return (f"{', '.join(hints)}: no Tesseract language (a code like deu, eng, frk, grc or script/Fraktur, "
            "or an ISO 639-1 code like de; `tesseract --list-langs` lists the installed ones)")


def script_of_lang(spec: str | None) -> str | None:
    """ISO 15924 code of what a --lang value reads (its first part): 'frk' → 'Latf', 'grc+lat'
    → 'Grek', 'deu' → 'Latn'; None for no value."""
    if not spec:
        return None
    first = script_name(canonical_name(split_lang(spec)[0]))
    return _SCRIPT_OF.get(first, "Latn")


def suggest_lang(script: str | None, language: str | None) -> str:
    """The --lang to suggest for a document of `script` (ISO 15924) whose text is in `language`
    (an ISO 639-3 code, '' or 'und' when unknown): the language's own data when it reads that
    script, else the script's usual data; '' when neither is known."""
    lang = canonical_name(language) if language and language != "und" else ""
    if lang and script_of_lang(lang) == (script or "Latn") and lang in DEBIAN_LANGUAGES:
        return lang
    if script in _SCRIPT_DEFAULT:
        return _SCRIPT_DEFAULT[script]
    return lang if lang in DEBIAN_LANGUAGES else ""


@lru_cache(maxsize=4)
def _installed(prefix: str | None) -> tuple[str, frozenset[str]]:
    try:
        out = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=30, check=False,
                             env={**os.environ, "OMP_THREAD_LIMIT": "1"})
    except (OSError, subprocess.SubprocessError):
        return "", frozenset()
    lines = out.stdout.splitlines()
    # The first line names the folder: List of available languages in "/usr/share/…/tessdata/" (11):
    folder = re.search(r'"([^"]+)"', lines[0]) if lines else None
    return (folder.group(1) if folder else ""), frozenset(line.strip() for line in lines[1:] if line.strip())


def installed_languages() -> frozenset[str]:
    """The language data installed for the tesseract on PATH (empty without tesseract).
    Cached per TESSDATA_PREFIX: one `tesseract --list-langs` per process."""
    return _installed(os.environ.get("TESSDATA_PREFIX"))[1]


def tessdata_folder() -> str:
    """Where the tesseract on PATH looks for language data ('' when unknown)."""
    return _installed(os.environ.get("TESSDATA_PREFIX"))[0]


def resolve_name(name: str, installed: frozenset[str]) -> str | None:
    """The installed data for one name (its alias resolved; a script model under either
    layout), None when it is not installed."""
    name = canonical_name(name)
    for candidate in (name, script_name(name), "script/" + script_name(name)):
        if candidate in installed:
            return candidate
    return None


def tesseract_has_language(spec: str) -> bool:
    """Whether the tesseract here has data for every part of `spec` ('deu+eng', 'de', 'frk')."""
    try:
        parts = split_lang(canonical_lang(spec))
    except ValueError:
        return False
    installed = installed_languages()
    return all(resolve_name(p, installed) for p in parts)


def install_hint(name: str) -> str:
    """How to get one language's data: the Debian package, or the file to copy."""
    package = debian_package(name)
    if package:
        return f"apt-get install {package}"
    name = canonical_name(name)
    where = tessdata_folder() or "the tessdata folder"
    what = f" ({NOT_PACKAGED[name]})" if name in NOT_PACKAGED else ""
    return (f"{DEBIAN_RELEASE} packages no {name}{what}: copy {script_name(name)}.traineddata from "
            f"github.com/tesseract-ocr/tessdata_best into {where}")


def missing_message(missing: list[str], installed: frozenset[str]) -> str:
    """One line: what is missing and how to install it."""
    have = f"installed: {', '.join(sorted(installed))}" if installed else "none installed"
    packages = [debian_package(m) for m in missing]
    hints = [f"apt-get install {' '.join(p for p in packages if p)}"] if any(packages) else []
    hints += [install_hint(m) for m, p in zip(missing, packages) if not p]
    return f"tesseract has no language data for {'+'.join(missing)}: {'; '.join(hints)} ({have})"


def resolve_lang(spec: str, installed: frozenset[str] | None = None) -> str:
    """`spec` as the installed data names it ('de+script/Fraktur' → 'deu+Fraktur' on Debian).
    UsageError, one line naming the Debian package(s) to install, when a part is missing."""
    try:
        parts = split_lang(canonical_lang(spec))
    except ValueError as exc:
        raise UsageError(f"--lang {exc}") from None
    installed = installed_languages() if installed is None else installed
    resolved = [resolve_name(p, installed) for p in parts]
    missing = [p for p, r in zip(parts, resolved) if r is None]
    if missing:
        raise UsageError(missing_message(missing, installed))
    return "+".join(r for r in resolved if r)

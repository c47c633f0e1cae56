"""Answers that are not readings: empty text, "there is no text" and refusals.

A model fails on a page by answering nothing, or by answering *about* the page instead of
reading it ("I'm sorry, but I can't…", "The image contains no text."). These detectors are
short-answer rules: long texts are content, whatever phrases they contain (a letter that says
"I am sorry" is a letter).
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------
# Empty / refusal thresholds

# Text with no letter or digit and at most this many visible symbols is empty: a lone "." or
# "|" is what models emit for blank input.
EMPTY_MAX_SYMBOLS = 3
# A refusal is short and mostly the refusal: text longer than this is content (a letter that
# apologises, a transcription followed by a remark), whatever phrases it contains.
REFUSAL_MAX_CHARS = 400
# …and the refusal phrase starts near the beginning (after at most a short preamble such as
# "Unfortunately," or a markdown quote).
REFUSAL_LEAD_CHARS = 150
# "There is no text in this image" answers are shorter still.
NO_TEXT_MAX_CHARS = 200
NO_TEXT_LEAD_CHARS = 80


# --------------------------------------------------------------------------------------------
# Empty, no-text and refusal answers

_INVISIBLE = re.compile(r"[\s\u200b\u200c\u200d\u2060\ufeff]+")
_FENCE = re.compile(r"```[A-Za-z]*")
_ALNUM = re.compile(r"[^\W_]")

_NO_TEXT_PATTERNS = (
    # English
    (
        r"\b(?:there\s+is|there['’]s|there\s+are|i\s+(?:can\s+)?see|i\s+(?:could\s+)?find|contains?|has|with)"
        r"\s+no\s+(?:visible\s+|readable\s+|legible\s+|discernible\s+|recogni[sz]able\s+)?(?:text|writing)\b"
    ),
    (
        r"\bno\s+(?:visible\s+|readable\s+|legible\s+)?text\s+(?:was\s+|is\s+)?"
        r"(?:found|detected|visible|present|available|to\s+(?:extract|transcribe|read))"
    ),
    (
        r"\b(?:does\s+not|doesn['’]t|do\s+not|don['’]t)\s+(?:appear\s+to\s+|seem\s+to\s+)?"
        r"(?:contain|have|include|show|see)\s+any\s+(?:visible\s+|readable\s+|legible\s+)?(?:text|writing)"
    ),
    (
        r"\b(?:image|page|document|picture)\s+(?:is|appears\s+to\s+be|seems\s+to\s+be)\s+"
        r"(?:completely\s+|entirely\s+|mostly\s+)?(?:blank|empty)\b"
    ),
    r"^\W*(?:blank(?:\s+page)?|empty(?:\s+page)?|no\s+text(?:\s+found)?)\W*$",
    # German, French, Spanish, Italian, Chinese
    r"\bkein(?:en)?\s+(?:lesbaren?\s+|sichtbaren?\s+|erkennbaren?\s+)?Text\b",
    r"\b(?:Seite|Bild)\s+ist\s+leer\b",
    r"^\W*leere\s+Seite\W*$",
    r"\baucun\s+texte\b",
    r"\bpage\s+(?:est\s+)?(?:blanche|vide)\b",
    r"\b(?:ningún\s+texto|no\s+hay\s+texto)\b",
    r"\bnessun\s+testo\b",
    r"没有(?:任何)?(?:可识别的|可见的)?(?:文字|文本)",
    r"空白页",
)
_NO_TEXT = re.compile("|".join(_NO_TEXT_PATTERNS), re.IGNORECASE)

_TASK_VERBS = (
    r"(?:help|assist|transcribe|read|process|provide|extract|comply|fulfil+|perform|identify"
    r"|view|see|access|share|recogni[sz]e|complete|support|analy[sz]e|interpret|ocr|convert"
    r"|open|do\s+that|do\s+this)"
)
_REFUSAL_PATTERNS = (
    # English
    (
        r"\bI\s*(?:can['’]?t|cannot|can\s+not|am\s+(?:not\s+able|unable)\s+to|['’]m\s+(?:not\s+able|unable)\s+to"
        r"|won['’]t|will\s+not)\s+(?:be\s+able\s+to\s+)?(?:\w+\s+or\s+|\w+,\s+)?"
    )
    + _TASK_VERBS
    + r"\b",
    r"\bI\s+(?:do\s+not|don['’]t)\s+have\s+(?:the\s+)?(?:ability|capability|capacity|access)\b",
    r"\bas\s+an?\s+(?:AI|artificial\s+intelligence|(?:large\s+)?language\s+model|text-based)\b",
    r"\b(?:cannot|can['’]t|unable\s+to|not\s+able\s+to)\s+(?:assist|help)\s+with\b",
    r"\bI\s+(?:must|have\s+to)\s+(?:respectfully\s+)?decline\b",
    r"\bI['’]m\s+not\s+(?:permitted|allowed)\s+to\b",
    r"\bagainst\s+my\s+(?:guidelines|polic(?:y|ies)|programming)\b",
    # German
    (
        r"\bich\s+kann\s+(?:Ihnen\s+|dir\s+|euch\s+)?(?:dabei\s+|hierbei\s+|damit\s+|hier\s+)?nicht\s+"
        r"(?:helfen|weiterhelfen|behilflich|transkribieren|lesen|verarbeiten|erkennen)"
    ),
    r"\bals\s+(?:eine?\s+)?(?:KI|künstliche\s+Intelligenz|Sprachmodell)\b",
    r"\bich\s+bin\s+nicht\s+in\s+der\s+Lage\b",
    # French
    r"\bje\s+ne\s+(?:peux|puis)\s+pas\s+(?:vous\s+)?(?:aider|transcrire|lire|traiter|fournir|accéder|voir)",
    r"\bje\s+ne\s+suis\s+pas\s+en\s+mesure\s+de\b",
    r"\ben\s+tant\s+qu['’](?:IA|intelligence\s+artificielle|assistant|modèle)",
    # Spanish, Portuguese, Italian
    r"\bno\s+puedo\s+(?:ayudar|transcribir|leer|procesar|proporcionar|cumplir|ver|acceder)",
    r"\bcomo\s+(?:una?\s+)?(?:IA|intelig[eê]ncia\s+artificial|modelo\s+de\s+lenguaje)\b",
    r"\bnão\s+(?:posso|consigo)\s+(?:ajudar|transcrever|ler|processar|fornecer|ver|acessar)",
    r"\bnon\s+(?:posso|sono\s+in\s+grado\s+di)\s+(?:aiutar\w*|trascrivere|leggere|elaborare|fornire|vedere|accedere)",
    r"\bin\s+quanto\s+(?:IA|intelligenza\s+artificiale|modello\s+linguistico)\b",
    # Dutch, Danish, Czech, Polish, Russian
    (
        r"\bik\s+kan\s+(?:je\s+|u\s+)?(?:hier\s+|daar\s+|hierbij\s+|daarbij\s+)?niet\s+(?:mee\s+)?"
        r"(?:helpen|transcriberen|lezen|verwerken)"
    ),
    r"\bjeg\s+kan\s+ikke\s+(?:hjælpe|transskribere|læse|behandle)",
    r"\bnemohu\s+(?:vám\s+)?(?:pomoci|přepsat|přečíst|zpracovat|poskytnout)",
    r"\bnie\s+mogę\s+(?:pomóc|przepisać|odczytać|przetworzyć)",
    r"\bя\s+не\s+могу\s+(?:помочь|транскрибировать|прочитать|обработать|распознать|предоставить)",
    r"\bкак\s+(?:ИИ|искусственный\s+интеллект|языковая\s+модель)\b",
    # Chinese, Japanese, Korean
    r"(?:抱歉|对不起|很遗憾)[，,]?\s*我(?:无法|不能)",
    r"我(?:无法|不能)(?:协助|帮助|帮忙|识别|提供|处理|转录|查看)",
    r"作为一?个?(?:AI|人工智能|语言模型)",
    r"申し訳(?:ありません|ございません)が",
    r"(?:お手伝い|対応|提供|読み取り|文字起こし)(?:することは)?できません",
    r"죄송하지만",
    r"(?:도와드릴|도울)\s*수\s*없습니다",
)
_REFUSAL = re.compile("|".join(_REFUSAL_PATTERNS), re.IGNORECASE)


def visible_text(text: str) -> str:
    """The text without whitespace, zero-width characters and code-fence markers."""
    return _INVISIBLE.sub("", _FENCE.sub("", text or ""))


def is_empty(text: str) -> bool:
    """No letter or digit, and at most EMPTY_MAX_SYMBOLS visible symbols."""
    visible = visible_text(text)
    return not visible or (len(visible) <= EMPTY_MAX_SYMBOLS and not _ALNUM.search(visible))


def _short_match(pattern: re.Pattern[str], text: str, max_chars: int, lead: int) -> bool:
    stripped = text.strip()
    if len(stripped) > max_chars:
        return False
    m = pattern.search(stripped)
    return m is not None and m.start() <= lead


def is_no_text_answer(text: str) -> bool:
    """A short answer saying the page has no text ("The image is blank.")."""
    return _short_match(_NO_TEXT, text, NO_TEXT_MAX_CHARS, NO_TEXT_LEAD_CHARS)


def is_refusal(text: str) -> bool:
    """A short answer that is mostly a refusal ("I'm sorry, but I can't assist with that.")."""
    return _short_match(_REFUSAL, text, REFUSAL_MAX_CHARS, REFUSAL_LEAD_CHARS)

"""Quality detectors: loops, truncation, empty and refused readings.

Real looping outputs reported in public issues live in tests/data/quality/ (one file each, the
source URL in its header). Every ground-truth page in tests/data/gt (human transcriptions of
Fraktur, polytonic Greek and typewritten pages) must come out ok.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.components import GT, GT_PAGE_COUNT
from vlmocr.runfolder.record import Status
from vlmocr.text import loops, nonanswers, quality
from vlmocr.text.loops import LoopFinding, detect_loop, trim_loop
from vlmocr.text.quality import (
    FLAG_BLANK_PAGE,
    FLAG_FINISH_CONTENT_FILTER,
    FLAG_FINISH_LENGTH,
    FLAG_FINISH_REPETITION,
    FLAG_LOOP,
    FLAG_NO_TEXT_ANSWER,
    FLAG_TEXT_ON_BLANK,
    assess,
    classify,
)

DATA = Path(__file__).parent.parent / "data" / "quality"
GT_PAGES = sorted(GT.glob("*/*.txt"))


def read_excerpt(name: str) -> tuple[dict[str, str], str]:
    """Header fields (`# key: value` lines before `---`) and the verbatim text after it."""
    raw = (DATA / name).read_text(encoding="utf-8")
    header, body = raw.split("---\n", 1)
    fields: dict[str, str] = {}
    for line in header.splitlines():
        key, _, value = line.lstrip("# ").partition(":")
        if value:
            fields.setdefault(key.strip(), value.strip())
    return fields, body


EXCERPTS = sorted(p.name for p in DATA.glob("*.txt"))

# A plain page of prose to put before a loop (a model usually reads some of the page well
# before it loops). Public-domain text: Melville, "Bartleby, the Scrivener" (1853).
PROSE = (
    "I am a rather elderly man. The nature of my avocations for the last thirty years has brought\n"
    "me into more than ordinary contact with what would seem an interesting and somewhat singular\n"
    "set of men, of whom as yet nothing that I know of has ever been written:—I mean the\n"
    "law-copyists or scriveners. I have known very many of them, professionally and privately,\n"
    "and if I pleased, could relate divers histories, at which good-natured gentlemen might smile,\n"
    "and sentimental souls might weep.\n"
)


# Dickens, "A Tale of Two Cities" (1859): prose built on a repeated phrase.
DICKENS = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way—in short, the period was so far like the present period, that some of its "
    "noisiest authorities insisted on its being received, for good or for evil, in the superlative degree "
    "of comparison only.\n"
)


def gt_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Real looping outputs from public issues


def test_excerpt_files_cite_their_source() -> None:
    assert len(EXCERPTS) >= 12
    for name in EXCERPTS:
        fields, body = read_excerpt(name)
        assert fields["source"].startswith("https://github.com/"), name
        assert fields["expect"] in {"loop", "refused", "loop-when-continued"}, name
        assert body.strip(), name


@pytest.mark.parametrize("name", [n for n in EXCERPTS if read_excerpt(n)[0]["expect"] == "loop"])
def test_real_loops_are_loops(name: str) -> None:
    _, body = read_excerpt(name)
    finding = detect_loop(body)
    assert finding is not None, name
    assert finding.at_end or finding.share >= loops.MID_MIN_SHARE
    # Either way the generation stopped (max_tokens or a normal stop), the status is loop.
    for reason in ("length", "stop"):
        status, flags = classify(body, reason)
        assert status == Status.loop and FLAG_LOOP in flags, (name, reason)
    assert FLAG_FINISH_LENGTH in classify(body, "length")[1]
    # What is left after trimming is no longer a loop, and is much shorter.
    trimmed = trim_loop(body, finding)
    assert len(trimmed) < len(body) * 0.75 or finding.kind == "duplicate_tail"
    assert detect_loop(trimmed) is None, (name, trimmed[-200:])


@pytest.mark.parametrize(
    ("name", "kind", "kept"),
    [
        # the poster text is kept once, after the preamble the reporter's script printed
        ("glm_ocr_220_slogan.txt", "chars", "----- OCR TEXT -----\nYOU DIDN'T COME THIS\nFAR TO ONLY COME\nTHIS FAR"),
        ("paddleocr_17532_kana.txt", "chars", "かくか"),
        ("mlx_vlm_549_blanks.txt", "chars", ">  _____ de"),
        ("deepseek_ocr_rs_53_toolbox.txt", "fuzzy_lines", "Hakate Toolbox"),
    ],
)
def test_real_loops_trim_to_one_copy(name: str, kind: str, kept: str) -> None:
    _, body = read_excerpt(name)
    finding = detect_loop(body)
    assert finding is not None and finding.kind == kind
    assert trim_loop(body, finding) == kept


def test_loop_across_a_wrapped_line_is_one_loop() -> None:
    # The reporter's terminal wrapped the escaped output ("garli\nc"): the loop goes on after it.
    _, body = read_excerpt("vllm_42016_recipe.txt")
    finding = detect_loop(body)
    assert finding is not None and finding.kind == "chars" and finding.at_end
    assert finding.start <= len("poon ") and finding.end == len(body)  # kept copy starts on a word
    assert "1 teaspoon garlic powder" in finding.unit and finding.repeats > 13


def test_html_rows_with_a_stray_line_break() -> None:
    _, body = read_excerpt("dots_ocr_245_empty_rows.txt")
    finding = detect_loop(body)
    assert finding is not None and finding.kind == "chars" and finding.at_end
    assert finding.repeats > 25 and finding.share > 0.95


def test_qquad_padding_inside_latex_is_a_loop_that_ends_before_the_text() -> None:
    _, body = read_excerpt("monkeyocr_32_qquad.txt")
    finding = detect_loop(body)
    assert finding is not None and not finding.at_end and finding.share > 0.5
    trimmed = trim_loop(body, finding)
    # the derivation's last line (after the padding) survives the trim
    assert trimmed.endswith("& { = { \\frac { \\mathbb { P } ( \\mathrm")
    assert trimmed.count("\\qquad") == 20


def test_bold_re_emission_of_the_last_sentence() -> None:
    _, body = read_excerpt("mineru_3312_bold_duplicate.txt")
    finding = detect_loop(body)
    assert finding is not None and finding.kind == "duplicate_tail"
    assert "**" not in trim_loop(body, finding)


def test_spaced_dot_leaders_quoted_in_issue_continued_to_the_end() -> None:
    fields, run = read_excerpt("deepseek_ocr_250_dots.txt")
    assert fields["expect"] == "loop-when-continued"
    # The quoted run alone is as long as a real table-of-contents leader: not a loop by itself.
    assert detect_loop(PROSE + "Introduction" + run + " 1\n") is None
    # The attached output runs on to max_tokens.
    text = PROSE + "Introduction" + run * 40
    finding = detect_loop(text)
    assert finding is not None and finding.at_end and finding.unit.strip() == "."
    assert trim_loop(text, finding) == PROSE + "Introduction ."
    assert classify(text, "length") == (Status.loop, [FLAG_LOOP, FLAG_FINISH_LENGTH])


def test_real_refusal() -> None:
    _, body = read_excerpt("page_assist_329_refusal.txt")
    assert classify(body, "stop") == (Status.refused, [])


# --------------------------------------------------------------------------------------------
# Loops that must be caught


def test_dot_leaders_running_to_the_end() -> None:
    text = "CONTENTS\n\nPreface .......... v\nI. The Voyage .......... 1\nII. The Island " + "." * 3000
    finding = detect_loop(text)
    assert finding is not None and finding.kind == "chars" and finding.unit == "."
    assert finding.at_end and finding.end == len(text)
    assert finding.start == text.index("II. The Island ") + len("II. The Island ")
    assert finding.share > 0.9
    assert trim_loop(text, finding) == text[: finding.start + 1]


def test_empty_table_row_repeated_fifty_times() -> None:
    head = "| Name | Born | Died |\n|---|---|---|\n| Anna Weiss | 1901 | 1942 |\n"
    text = PROSE + "\n" + head + "| | | |\n" * 50
    finding = detect_loop(text)
    assert finding is not None and finding.at_end
    assert finding.unit == "| | | |\n" and finding.repeats == pytest.approx(50, abs=1)
    assert trim_loop(text, finding) == PROSE + "\n" + head + "| | | |"


def test_filled_table_row_repeated_fifty_times() -> None:
    text = PROSE + "| Total | 1,234 | 5,678 |\n" * 50
    finding = detect_loop(text)
    assert finding is not None and finding.unit == "| Total | 1,234 | 5,678 |\n"
    assert trim_loop(text, finding) == PROSE + "| Total | 1,234 | 5,678 |"


def test_table_rows_repeated_in_the_middle_covering_most_of_the_text() -> None:
    rows = "| 3 | Wien | Praha |\n| 4 | Brno | Linz |\n"
    text = PROSE + rows * 30 + "Signed in Vienna, 12 March 1938.\n"
    finding = detect_loop(text)
    assert finding is not None and not finding.at_end and finding.share > 0.5
    assert trim_loop(text, finding) == PROSE + rows + "Signed in Vienna, 12 March 1938.\n"


def test_paragraph_repeated() -> None:
    paragraph = " ".join(PROSE.split())
    text = "Chapter I\n\n" + (paragraph + "\n\n") * 5
    finding = detect_loop(text)
    assert finding is not None and finding.at_end
    assert trim_loop(text, finding) == "Chapter I\n\n" + paragraph


def test_paragraph_emitted_twice_at_the_end() -> None:
    paragraph = " ".join(PROSE.split())
    text = "Chapter I\n\n" + paragraph + "\n\n" + paragraph
    finding = detect_loop(text)
    assert finding is not None and finding.at_end
    assert trim_loop(text, finding) == "Chapter I\n\n" + paragraph


def test_page_emitted_again_from_the_top() -> None:
    page = "# Minutes\n\n" + PROSE + "\n" + DICKENS + "\n| Item | Price |\n|---|---|\n| Tea | 0.70 |\n"
    text = page + "\n" + page[: len(page) // 2]
    finding = detect_loop(text)
    assert finding is not None and finding.at_end and finding.start == 0
    assert trim_loop(text, finding) == page.rstrip()


@pytest.mark.parametrize("word", ["the", "und", "καὶ", "是"])
def test_the_the_the(word: str) -> None:
    text = PROSE + ("and " + word + " ") + (word + " ") * 60
    finding = detect_loop(text)
    assert finding is not None and finding.unit.strip() == word
    assert trim_loop(text, finding) == PROSE + "and " + word


def test_sentence_repeated_inside_one_line() -> None:
    sentence = "The committee met on Tuesday and adjourned without a decision. "
    text = "Minutes. " + sentence * 12
    finding = detect_loop(text)
    assert finding is not None and finding.at_end
    assert trim_loop(text, finding) == "Minutes. " + sentence.strip()


def test_numbered_list_counting_on_with_identical_content() -> None:
    text = "Ingredients:\n" + "".join(f"{i}. Tomato soup with basil\n" for i in range(1, 81))
    finding = detect_loop(text)
    assert finding is not None and finding.kind == "counter" and finding.at_end
    assert trim_loop(text, finding) == "Ingredients:\n1. Tomato soup with basil"


def test_numbered_list_loop_in_a_markdown_table() -> None:
    text = "| No. | Item |\n|---|---|\n" + "".join(f"| {i} | Pepperoni, small |\n" for i in range(1, 60))
    finding = detect_loop(text)
    assert finding is not None and finding.kind == "counter"


def test_counting_off_bare_numbers() -> None:
    # DeepSeek-OCR counted 1 to 365 on an image of repeated tokens
    # (https://github.com/deepseek-ai/DeepSeek-OCR/issues/160).
    text = "\n".join(str(i) for i in range(1, 366))
    finding = detect_loop(text)
    assert finding is not None and finding.kind == "counter" and finding.at_end


def test_repeated_latex() -> None:
    text = "The sum is\n$$\nS = " + "\\sum_{i=1}^{n} x_i + " * 40 + "\n$$\n"
    finding = detect_loop(text)
    assert finding is not None and "\\sum_{i=1}^{n} x_i" in finding.unit


def test_repeated_latex_rows() -> None:
    text = "$$\n\\begin{array}{ll}\n" + "a_{1} & = b_{1} \\\\\n" * 30 + "\\end{array}\n$$\n"
    finding = detect_loop(text)
    assert finding is not None and finding.kind in {"lines", "chars"}


def test_multi_line_block_repeated() -> None:
    block = "Name: Karel Novák\nBorn: Praha\nProfession: teacher\n"
    text = PROSE + block * 10
    finding = detect_loop(text)
    assert finding is not None and finding.unit == block
    assert trim_loop(text, finding) == PROSE + block.rstrip()


def test_last_copy_cut_short_by_max_tokens() -> None:
    block = "Ordnung der Sitzung\nBericht des Vorstandes\nVerschiedenes\n"
    text = PROSE + block * 8 + "Ordnung der Si"
    finding = detect_loop(text)
    assert finding is not None and finding.at_end and finding.end == len(text)


def test_whitespace_to_the_end() -> None:
    text = PROSE + " " * 2000
    finding = detect_loop(text)
    assert finding is not None and finding.at_end
    assert trim_loop(text, finding) == PROSE.rstrip()


def test_fuzzy_word_loop() -> None:
    # Variants cycling inside one line, the way a model wanders without repeating verbatim.
    parts = ["I'll do it.", "I'll implement it.", "I'll start.", "I'll begin coding.", "I'll write the code."]
    cycle = [parts[i % 5] if i % 7 else parts[(i + 2) % 5] for i in range(60)]
    text = "Plan: " + " ".join(cycle)
    finding = detect_loop(text)
    assert finding is not None and finding.at_end


# --------------------------------------------------------------------------------------------
# Legitimate repetition that must not be flagged


def test_table_of_contents_with_dot_leaders() -> None:
    titles = [
        "Preface",
        "The Voyage Out",
        "Arrival at the Island",
        "The First Winter",
        "Letters Home",
        "A Journey Inland",
        "The Mission School",
        "Harvest",
        "The Flood",
        "Rebuilding",
        "The Second Winter",
        "Visitors from the Coast",
        "The Trial",
        "Departure",
        "At Sea",
        "Return",
        "Afterword",
        "Notes",
        "Bibliography",
        "Index",
    ]
    lines = [f"{t} {'.' * (62 - len(t))} {3 + 17 * i}" for i, t in enumerate(titles)]
    text = "CONTENTS\n\n" + "\n".join(lines) + "\n"
    assert detect_loop(text) is None
    assert classify(text, "stop") == (Status.ok, [])
    spaced = "CONTENTS\n\n" + "\n".join(f"{t} {'. ' * 28}{3 + 17 * i}" for i, t in enumerate(titles))
    assert detect_loop(spaced) is None


def test_price_list() -> None:
    items = [
        ("Coffee", "0.80"),
        ("Coffee with milk", "0.95"),
        ("Tea", "0.70"),
        ("Tea with lemon", "0.85"),
        ("Hot chocolate", "1.10"),
        ("Lemonade", "0.90"),
        ("Mineral water", "0.60"),
        ("Beer, small", "1.20"),
        ("Beer, large", "1.90"),
        ("White wine", "2.40"),
        ("Red wine", "2.40"),
        ("Apple strudel", "1.50"),
        ("Sachertorte", "1.80"),
        ("Bread roll", "0.20"),
        ("Goulash soup", "2.10"),
        ("Sausages", "2.60"),
    ]
    text = "PRICE LIST\n\n" + "\n".join(f"{name} {'.' * (30 - len(name))} {price}" for name, price in items)
    assert detect_loop(text) is None
    table = "| Item | Price |\n|---|---|\n" + "\n".join(f"| {name} | {price} |" for name, price in items)
    assert detect_loop(table) is None


AULD_LANG_SYNE_CHORUS = (
    "For auld lang syne, my dear,\nFor auld lang syne.\nWe'll tak a cup o' kindness yet,\nFor auld lang syne.\n"
)
AULD_LANG_SYNE_VERSES = [
    "Should auld acquaintance be forgot,\nAnd never brought to mind?\nShould auld acquaintance be forgot,\nAnd auld lang syne!\n",
    "And surely ye'll be your pint-stowp!\nAnd surely I'll be mine!\nAnd we'll tak a cup o' kindness yet,\nFor auld lang syne.\n",
    "We twa hae run about the braes,\nAnd pou'd the gowans fine;\nBut we've wander'd mony a weary fit,\nSin' auld lang syne.\n",
    "We twa hae paidl'd in the burn,\nFrae morning sun till dine;\nBut seas between us braid hae roar'd\nSin' auld lang syne.\n",
    "And there's a hand, my trusty fiere!\nAnd gie's a hand o' thine!\nAnd we'll tak a right gude-willie waught,\nFor auld lang syne.\n",
]


def test_song_with_a_refrain() -> None:
    # Burns, "Auld Lang Syne" (1788): the chorus is written out after every verse.
    text = "AULD LANG SYNE\n\n" + "\n".join(v + "\n" + AULD_LANG_SYNE_CHORUS for v in AULD_LANG_SYNE_VERSES)
    assert detect_loop(text) is None
    assert classify(text, "stop") == (Status.ok, [])


def test_poem_with_a_one_line_refrain() -> None:
    stanzas = [
        "Once upon a midnight dreary, while I pondered, weak and weary,",
        "Ah, distinctly I remember it was in the bleak December;",
        "And the silken, sad, uncertain rustling of each purple curtain",
        "Presently my soul grew stronger; hesitating then no longer,",
        "Deep into that darkness peering, long I stood there wondering, fearing,",
    ]
    text = "\n\n".join(
        f"{s}\nOver many a quaint and curious volume of forgotten lore,\nQuoth the Raven, \u201cNevermore.\u201d"
        for s in stanzas
    )
    assert detect_loop(text) is None


def test_numeric_table_rows_that_differ() -> None:
    rows = []
    value = 7
    for year in range(1841, 1881):
        value = (value * 37 + 11) % 997
        rows.append(f"| {year} | {value % 90 + 10} | {value % 13}.{value % 10} | {value} |")
    text = "| Year | Births | Rate | Total |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    assert detect_loop(text) is None
    bare = "\n".join(r.replace("| ", "").replace(" |", "") for r in rows)
    assert detect_loop(bare) is None


def test_numbered_rows_with_differing_data() -> None:
    text = "\n".join(f"{i}. {((i * 7919) % 1000) / 10:.1f} kg {((i * 104729) % 97)} Kč" for i in range(1, 61))
    assert detect_loop(text) is None


def test_numbered_blank_form() -> None:
    text = "Witnesses:\n" + "".join(f"{i}. ______________________________\n" for i in range(1, 16))
    assert detect_loop(text) is None


def test_separators_and_rules() -> None:
    text = "\n—\n".join(PROSE.splitlines()) + "\n\n* * *\n\n" + "\n— — —\n".join(DICKENS.split(", "))
    assert detect_loop(text) is None
    form = PROSE + "\nRemarks:\n" + "_" * 60 + "\n" + ("_" * 60 + "\n") * 11 + "\nDate: ________  Signature: ________\n"
    assert detect_loop(form) is None
    rules = PROSE + "\n" + "—" * 40 + "\n" + "=" * 70 + "\n" + "-" * 70 + "\n" + DICKENS
    assert detect_loop(rules) is None


def test_prose_built_on_a_repeated_phrase() -> None:
    assert detect_loop(DICKENS) is None
    assert detect_loop(PROSE + DICKENS) is None


def test_signature_line_repeated_for_a_second_signed_section() -> None:
    signature = "-- Dr. Josef Löwenherz, Israelitische Kultusgemeinde Wien, 12. November 1938"
    text = PROSE + signature + "\n\nNachtrag: Die Listen folgen mit getrennter Post.\n" + signature + "\n"
    assert detect_loop(text) is None


def test_paragraph_re_emitted_after_the_page() -> None:
    paragraph = " ".join(DICKENS.split())
    text = PROSE + "\n" + paragraph + "\n\nBook the First—Recalled to Life\n\n" + paragraph + "\n"
    finding = detect_loop(text)
    assert finding is not None and finding.kind == "duplicate_tail"
    assert trim_loop(text, finding) == text[: text.rindex(paragraph)].rstrip()


def test_signature_lines_repeated_three_times() -> None:
    text = PROSE + "\n" + "Signature: ____________________\n" * 3
    assert detect_loop(text) is None


def test_short_texts() -> None:
    assert detect_loop("") is None
    assert detect_loop("ha ha ha") is None
    assert detect_loop("7") is None


def test_ground_truth_present() -> None:
    # the parametrized test below would pass vacuously over no pages
    assert len(GT_PAGES) == GT_PAGE_COUNT


@pytest.mark.parametrize("path", GT_PAGES, ids=[f"{p.parent.name}/{p.stem}" for p in GT_PAGES])
def test_ground_truth_pages_are_ok(path: Path) -> None:
    text = gt_text(path)
    assert detect_loop(text) is None
    assert classify(text, "stop") == (Status.ok, [])
    assert classify(text, "length") == (Status.truncated, [FLAG_FINISH_LENGTH])
    # A VLM joins printed lines into paragraphs: same verdict.
    assert detect_loop(" ".join(text.split())) is None
    # …and a page that loops after its real text is caught and trimmed back to the page.
    looped = text.rstrip() + "\n" + "| | | |\n" * 60
    finding = detect_loop(looped)
    assert finding is not None and finding.at_end
    assert trim_loop(looped, finding) == text.rstrip() + "\n| | | |"


# --------------------------------------------------------------------------------------------
# classify


def test_status_values_are_the_record_strings() -> None:
    status, flags = classify("A page of text that is read well.", "stop")
    assert status == "ok" and status is Status.ok and flags == []


@pytest.mark.parametrize("text", ["", "   \n\t ", "```\n```", "```markdown\n\n```", "\u200b", ".", "|", "—"])
def test_empty(text: str) -> None:
    assert classify(text, "stop") == (Status.empty, [])
    assert classify(text, "stop", blank_image=True) == (Status.ok, [FLAG_BLANK_PAGE])


def test_empty_at_max_tokens_keeps_the_length_flag() -> None:
    # e.g. every generated token was a special token that the server stripped
    assert classify("", "length") == (Status.empty, [FLAG_FINISH_LENGTH])


def test_a_lone_page_number_is_content() -> None:
    assert classify("7", "stop") == (Status.ok, [])
    assert classify("17.", "stop") == (Status.ok, [])


@pytest.mark.parametrize(
    "text",
    [
        "The image is blank.",
        "There is no text in this image.",
        "The page appears to be completely empty.",
        "I don't see any text in the image.",
        "No text found.",
        "[blank page]",
        "Das Bild enthält keinen lesbaren Text.",
        "Il n'y a aucun texte sur cette page.",
        "图片中没有文字。",
    ],
)
def test_no_text_answers_are_empty(text: str) -> None:
    assert classify(text, "stop") == (Status.empty, [FLAG_NO_TEXT_ANSWER])
    assert classify(text, "stop", blank_image=True) == (Status.ok, [FLAG_BLANK_PAGE, FLAG_NO_TEXT_ANSWER])


def test_text_read_from_a_blank_image_is_suspect_never_ok() -> None:
    """Issue 30, point 0: the image says there is nothing to read; the text was made up."""
    status, flags = classify("Happy birthday to you!", "stop", blank_image=True)
    assert status == Status.suspect and FLAG_TEXT_ON_BLANK in flags
    assert classify("Happy birthday to you!", "stop")[0] == Status.ok


def test_truncated() -> None:
    assert classify(PROSE, "length") == (Status.truncated, [FLAG_FINISH_LENGTH])
    assert classify(PROSE, "LENGTH") == (Status.truncated, [FLAG_FINISH_LENGTH])


def test_vllm_repetition_stop_is_a_loop() -> None:
    # vLLM's repetition detector ended the generation: a loop even if few copies remain.
    assert classify(PROSE, "repetition") == (Status.loop, [FLAG_FINISH_REPETITION])
    looping = PROSE + "| | | |\n" * 60
    assert classify(looping, "repetition") == (Status.loop, [FLAG_LOOP, FLAG_FINISH_REPETITION])


def test_loop_beats_truncated_and_both_are_recorded() -> None:
    text = PROSE + "." * 2000
    result = assess(text, "length")
    assert result.status == Status.loop
    assert result.flags == [FLAG_LOOP, FLAG_FINISH_LENGTH]
    assert isinstance(result.loop, LoopFinding) and result.loop.unit == "."
    assert classify(text, "stop") == (Status.loop, [FLAG_LOOP])


def test_content_filter_is_refused() -> None:
    assert classify("", "content_filter") == (Status.refused, [FLAG_FINISH_CONTENT_FILTER])
    assert classify(PROSE, "content_filter") == (Status.refused, [FLAG_FINISH_CONTENT_FILTER])


def test_unknown_finish_reason_is_recorded() -> None:
    assert classify(PROSE, "abort") == (Status.ok, ["finish_abort"])
    assert classify(PROSE, None) == (Status.ok, [])
    assert classify(PROSE, "eos") == (Status.ok, [])


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't assist with that.",
        "I’m sorry, but I can’t help with transcribing this document.",
        "I cannot transcribe this image because it contains personal information.",
        "I'm unable to read the text in this image.",
        "As an AI language model, I cannot process images.",
        "Sorry, I can't help with that request.",
        "Unfortunately, I am not able to provide a transcription of this document.",
        "Es tut mir leid, aber ich kann Ihnen dabei nicht helfen.",
        "Als KI kann ich keine Dokumente mit personenbezogenen Daten transkribieren.",
        "Je suis désolé, mais je ne peux pas transcrire ce document.",
        "Lo siento, pero no puedo ayudar con eso.",
        "Mi dispiace, ma non posso trascrivere questo documento.",
        "Desculpe, mas não posso ajudar com isso.",
        "Het spijt me, maar ik kan je hier niet mee helpen.",
        "Omlouvám se, ale nemohu vám pomoci.",
        "Beklager, men jeg kan ikke hjælpe med det.",
        "Przepraszam, ale nie mogę pomóc w tej sprawie.",
        "Извините, но я не могу помочь с этим.",
        "抱歉，我无法协助处理这个请求。",
        "申し訳ありませんが、お手伝いできません。",
        "죄송하지만 도와드릴 수 없습니다.",
    ],
)
def test_refusals(text: str) -> None:
    assert classify(text, "stop") == (Status.refused, [])


def test_letters_that_apologise_are_content() -> None:
    short_note = "Dear Mr. Schwarz,\nI am sorry, but I cannot come on Tuesday.\nYours, Karl"
    assert classify(short_note, "stop") == (Status.ok, [])
    letter = (
        "Dear Sir,\n\nI'm sorry, but I can't help feeling that the committee has treated the matter unfairly. "
        "The minutes of the last meeting record neither my objection nor the vote that followed it.\n"
        + PROSE
        + "\nI remain, Sir, your obedient servant,\nJ. Smith"
    )
    assert classify(letter, "stop") == (Status.ok, [])
    # A refusal phrase deep inside a long transcription is content, not a refusal.
    quoted = PROSE + "He wrote: “I cannot help you with this, as I have told you before.”"
    assert classify(quoted, "stop") == (Status.ok, [])


def test_ground_truth_contains_no_refusal_or_no_text_answer() -> None:
    for path in GT_PAGES:
        text = gt_text(path)
        assert not nonanswers.is_refusal(text), path
        assert not nonanswers.is_no_text_answer(text), path
        assert not nonanswers.is_empty(text), path


# --------------------------------------------------------------------------------------------
# Cost: linear in the text length (measured by counting executed lines, not by a clock)


def _executed_lines(func, *args) -> int:
    count = 0
    module_files = {m.__file__ for m in (loops, nonanswers, quality)}

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename not in module_files:
            return None
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        func(*args)
    finally:
        sys.settrace(previous)
    return count


def test_cost_grows_linearly() -> None:
    pages = [gt_text(p) for p in GT_PAGES]
    one = "\n".join(pages[:4])
    four = "\n".join(pages[:16])
    ratio = len(four) / len(one)
    cost_one = _executed_lines(detect_loop, one)
    cost_four = _executed_lines(detect_loop, four)
    assert cost_four < 1.5 * ratio * cost_one  # quadratic would be ratio² times
    # A 5,000-character page executes well under 12,000 Python lines (about a millisecond);
    # the heavy lifting is C-level string search and slice comparison.
    page = pages[0]
    while len(page) < 5000:
        page += "\n" + pages[len(page) % len(pages)]
    assert _executed_lines(classify, page[:5000], "stop") < 12_000
    # Loops are no dearer: a run is measured once and skipped, short lines stay cheap.
    for loop in ("." * 5000, "| | | |\n" * 625, "".join(f"{i}. Soup\n" for i in range(1, 700))[:5000]):
        assert _executed_lines(detect_loop, loop) < 12_000

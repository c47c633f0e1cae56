"""From a model's raw answer to clean text, layout blocks and page fields."""

from __future__ import annotations

import json

import pytest

from vlmocr.profiles import Profile, load_profile
from vlmocr.text.postprocess import FIGURE_TYPES, LAYOUT_LABELS, postprocess, split_pages, strip_fences

EOS = "<｜end▁of▁sentence｜>"


@pytest.fixture(autouse=True)
def _no_user_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLMOCR_PROFILE_PATH", raising=False)


def test_deepseek_grounded_output_becomes_blocks_and_clean_text() -> None:
    raw = (
        "<|ref|>title<|/ref|><|det|>[[61, 54, 937, 98]]<|/det|>\n# Annual Report 1923\n\n"
        "<|ref|>text<|/ref|><|det|>[[60, 120, 940, 400]]<|/det|>\nThe harvest was good.\nPrices fell.\n\n"
        "<|ref|>image<|/ref|><|det|>[[100, 420, 500, 700]]<|/det|>\n\n"
        "<|ref|>table<|/ref|><|det|>[[60, 720, 940, 900]]<|/det|>\n<table><tr><td>a</td></tr></table>" + EOS
    )
    text, blocks, fields = postprocess(load_profile("deepseek-ocr"), raw)
    assert text == "# Annual Report 1923\n\nThe harvest was good.\nPrices fell.\n\n<table><tr><td>a</td></tr></table>"
    assert blocks == [
        {"type": "title", "bbox": [61, 54, 937, 98], "text": "# Annual Report 1923"},
        {"type": "text", "bbox": [60, 120, 940, 400], "text": "The harvest was good.\nPrices fell."},
        {"type": "image", "bbox": [100, 420, 500, 700], "text": ""},
        {"type": "table", "bbox": [60, 720, 940, 900], "text": "<table><tr><td>a</td></tr></table>"},
    ]
    assert fields is None
    assert "<|" not in text and "end▁of" not in text


def test_unlimited_ocr_det_variants() -> None:
    raw = (
        "<|det|>title [12, 30, 980, 80]<|/det|># Heading\n"
        "<|det|>text [[100, 200, 400, 300], [500, 250, 900, 350]]<|/det|>Body across\ntwo columns\n"
        "<|det|>image [[1, 2, 3, 4]]<|/det|>\n" + EOS
    )
    text, blocks, _ = postprocess(load_profile("unlimited-ocr"), raw)
    assert text == "# Heading\n\nBody across\ntwo columns"
    assert blocks == [
        {"type": "title", "bbox": [12, 30, 980, 80], "text": "# Heading"},
        {"type": "text", "bbox": [100, 200, 900, 350], "text": "Body across\ntwo columns"},  # union of both boxes
        {"type": "image", "bbox": [1, 2, 3, 4], "text": ""},
    ]


def test_text_before_the_first_tag_and_word_grounding_are_kept() -> None:
    raw = "Preamble line\n<|ref|>CHATEAU TAMAGNE 2021<|/ref|><|det|>[[12, 34, 56, 78]]<|/det|>"
    text, blocks, _ = postprocess(load_profile("deepseek-ocr"), raw)
    assert text == "Preamble line\n\nCHATEAU TAMAGNE 2021"
    assert blocks == [{"type": "text", "bbox": [12, 34, 56, 78], "text": "CHATEAU TAMAGNE 2021"}]


def test_a_lone_ref_does_not_swallow_the_next_tag() -> None:
    raw = "<|ref|>note<|/ref|> loose words\n<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nBody"
    text, blocks, _ = postprocess(load_profile("deepseek-ocr"), raw)
    assert blocks == [{"type": "text", "bbox": [1, 2, 3, 4], "text": "Body"}]
    assert text == "note loose words\n\nBody"


def test_a_single_word_in_ref_is_page_text_not_a_label() -> None:
    # Word-level grounding puts the words read in <|ref|>: one word there is text, not a label.
    raw = (
        "<|ref|>CHATEAU<|/ref|><|det|>[[12, 34, 56, 78]]<|/det|>\n"
        "<|ref|>Tamagne<|/ref|><|det|>[[60, 34, 99, 78]]<|/det|>\n"
        "<|ref|>title<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n# Heading"
    )
    text, blocks, _ = postprocess(load_profile("deepseek-ocr"), raw)
    assert text == "CHATEAU\n\nTamagne\n\n# Heading"
    assert [(b["type"], b["text"]) for b in blocks] == [("text", "CHATEAU"), ("text", "Tamagne"), ("title", "# Heading")]


def test_figure_kinds_are_layout_labels() -> None:
    # figures.find crops blocks of these types: their label must never be read as page text.
    assert FIGURE_TYPES <= LAYOUT_LABELS
    raw = "<|ref|>chart<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n\n<|ref|>Picture<|/ref|><|det|>[[5, 6, 7, 8]]<|/det|>\nCaption"
    text, blocks, _ = postprocess(load_profile("deepseek-ocr"), raw)
    assert text == "Caption"
    assert [b["type"] for b in blocks] == ["chart", "Picture"]


def test_strip_without_keeping_blocks() -> None:
    profile = Profile(name="x", prompt="p", postprocess={"strip_grounding": True, "keep_grounding_as_blocks": False})
    text, blocks, _ = postprocess(profile, "<|ref|>text<|/ref|><|det|>[[1,2,3,4]]<|/det|>\nHello")
    assert (text, blocks) == ("Hello", None)


def test_plain_text_passes_through() -> None:
    text, blocks, fields = postprocess(load_profile("unlimited-ocr"), "Just text.\n\n\n\nMore.")
    assert (text, blocks, fields) == ("Just text.\n\nMore.", None, None)


def test_olmocr_front_matter_becomes_fields() -> None:
    raw = (
        "---\nprimary_language: en\nis_rotation_valid: true\nrotation_correction: 0\n"
        "is_table: false\nis_diagram: false\n---\nThe quick brown fox.\n\nSecond paragraph."
    )
    text, blocks, fields = postprocess(load_profile("olmocr-2"), raw)
    assert text == "The quick brown fox.\n\nSecond paragraph."
    assert blocks is None
    assert fields == {"language": "en", "rotation_valid": True, "rotation": 0, "is_table": False, "is_diagram": False}


def test_front_matter_edge_cases() -> None:
    profile = load_profile("olmocr-2")
    text, _, fields = postprocess(profile, "---\nprimary_language: null\nis_rotation_valid: False\nrotation_correction: 90\n---\n")
    assert text == ""
    assert fields == {"language": None, "rotation_valid": False, "rotation": 90}
    text, _, fields = postprocess(profile, "No front matter here.\n---\nnot: yaml")
    assert fields is None and text.startswith("No front matter")


def test_fences_wrapping_the_whole_answer_are_stripped() -> None:
    assert strip_fences("```markdown\n# Title\n\nBody\n```") == "# Title\n\nBody"
    assert strip_fences("```\nplain\n```\n") == "plain"
    inner = "```markdown\nText\n```python\nx = 1\n```\nMore\n```"
    assert strip_fences(inner) == "Text\n```python\nx = 1\n```\nMore"
    # Not wrapped: a code block in the middle stays.
    middle = "Intro\n```\ncode\n```\nOutro"
    assert strip_fences(middle) == middle
    # Truncated: the opening fence goes even though its close never came.
    assert strip_fences("```markdown\n# Title\nBody cut off") == "# Title\nBody cut off"
    text, _, _ = postprocess(load_profile("generic"), "```md\nHello\n```")
    assert text == "Hello"


def test_dots_json_layout() -> None:
    layout = [
        {"bbox": [10, 10, 600, 60], "category": "Page-header", "text": "ACME Ltd"},
        {"bbox": [100, 100, 1100, 180], "category": "Title", "text": "# Invoice"},
        {"bbox": [100, 450, 400, 700], "category": "Picture"},
        {"bbox": [100, 200, 1100, 400], "category": "Table", "text": "<table><tr><td>Pen</td></tr></table>"},
    ]
    text, blocks, _ = postprocess(load_profile("dots-ocr"), "```json\n" + json.dumps(layout) + "\n```")
    assert text == "ACME Ltd\n\n# Invoice\n\n<table><tr><td>Pen</td></tr></table>"
    assert blocks is not None and [b["type"] for b in blocks] == ["Page-header", "Title", "Picture", "Table"]
    assert blocks[1] == {"type": "Title", "bbox": [100, 100, 1100, 180], "text": "# Invoice"}


def test_truncated_dots_json_keeps_complete_elements() -> None:
    raw = '[{"bbox": [1, 2, 3, 4], "category": "Text", "text": "kept"}, {"bbox": [5, 6, 7, 8], "category": "Text", "text": "cut of'
    text, blocks, _ = postprocess(load_profile("dots-ocr"), raw)
    assert text == "kept"
    assert blocks == [{"type": "Text", "bbox": [1, 2, 3, 4], "text": "kept"}]


def test_doctags() -> None:
    raw = (
        "<doctag><section_header_level_1><loc_10><loc_20><loc_300><loc_40>Intro</section_header_level_1>"
        "<text><loc_10><loc_50><loc_490><loc_100>Some text here.</text>"
        "<otsl><loc_1><loc_2><loc_3><loc_4><ched>A<ched>B<nl><fcel>1<fcel>2<nl></otsl></doctag>"
    )
    text, blocks, _ = postprocess(load_profile("granite-docling"), raw)
    assert text == "## Intro\n\nSome text here.\n\nA | B\n1 | 2"
    assert blocks is not None
    assert blocks[1] == {"type": "text", "bbox": [20, 100, 980, 200], "text": "Some text here."}


def test_chandra_html_blocks() -> None:
    raw = (
        '<div data-bbox="[10, 20, 900, 60]" data-label="Section-Header"><h2>Intro</h2></div>'
        '<div data-bbox="[10, 80, 900, 300]" data-label="Text"><p>Line one<br>line <math>x^2</math> two &amp; more</p></div>'
        '<div data-bbox="5 310 900 500" data-label="Table"><table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table></div>'
    )
    text, blocks, _ = postprocess(load_profile("chandra"), raw)
    assert text == "## Intro\n\nLine one\nline $x^2$ two & more\n\na | b\n1 | 2"
    assert blocks == [
        {"type": "Section-Header", "bbox": [10, 20, 900, 60], "text": "## Intro"},
        {"type": "Text", "bbox": [10, 80, 900, 300], "text": "Line one\nline $x^2$ two & more"},
        {"type": "Table", "bbox": [5, 310, 900, 500], "text": "a | b\n1 | 2"},
    ]


def test_lightonocr_grounding_blocks() -> None:
    # The README's example of grounding output (github.com/lightonai/LightOnOCR): a box on 0-1000
    # before every block, the text running to the next box, "text+" continuing the block before.
    raw = (
        "![image](309,90,691,516) Model architecture diagram showing NaViT, Projection, Embedding\n"
        "![caption](400,555,591,566) Figure 1: Model architecture.\n"
        "![title](113,608,263,623) ## 2.2 LightOnOCR-1\n"
        "![text](112,640,882,698) The first version of LightOnOCR [13], established\nthe core architecture\n"
        "![text+]( 500, 100, 880, 200 )\ncontinued in the next column.\n"
        "![page_number](491,935,505,950) 3"
    )
    text, blocks, _ = postprocess(load_profile("lightonocr-3"), raw)
    # The figure's description is the model's, not the page's: in its block, not in the text.
    assert text == ("Figure 1: Model architecture.\n\n## 2.2 LightOnOCR-1\n\nThe first version of LightOnOCR [13], "
                    "established\nthe core architecture continued in the next column.\n\n3")
    assert blocks is not None and [b["type"] for b in blocks] == ["image", "caption", "title", "text", "text+", "page_number"]
    assert blocks[0] == {"type": "image", "bbox": [309, 90, 691, 516],
                         "text": "Model architecture diagram showing NaViT, Projection, Embedding"}
    assert blocks[4]["bbox"] == [500, 100, 880, 200] and blocks[4]["text"] == "continued in the next column."
    # No box at all (a plain answer): the text as it came, no blocks.
    assert postprocess(load_profile("lightonocr-3"), "Just text ![alt](pic.png)") == ("Just text ![alt](pic.png)", None, None)


def test_split_pages() -> None:
    profile = load_profile("unlimited-ocr")
    assert split_pages(profile, "one\n<PAGE>\ntwo\n<PAGE>\nthree", 3) == ["one", "two", "three"]
    assert split_pages(profile, "<PAGE>one<PAGE>two", 2) == ["one", "two"]
    assert split_pages(profile, "one<PAGE>two<PAGE>", 2) == ["one", "two"]
    assert split_pages(profile, "one<PAGE>two", 3) is None
    assert split_pages(profile, "one<PAGE>two<PAGE>three", 2) is None
    assert split_pages(profile, "only page", 1) == ["only page"]


def test_the_turn_an_olmocr_answer_asks_for():
    from vlmocr.text.postprocess import parse_front_matter, rotation_asked

    body, fields = parse_front_matter("---\nprimary_language: en\nis_rotation_valid: False\nrotation_correction: 90\n"
                                      "is_table: False\nis_diagram: False\n---\ntext")
    assert body == "text" and rotation_asked(fields) == 90
    assert rotation_asked({"rotation_valid": True, "rotation": 90}) == 0  # upright: nothing to do
    assert rotation_asked({"rotation_valid": False, "rotation": 45}) == 0  # not a quarter turn
    assert rotation_asked({"rotation_valid": False, "rotation": True}) == 0
    assert rotation_asked(None) == 0 and rotation_asked({}) == 0

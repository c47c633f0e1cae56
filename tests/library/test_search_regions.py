"""Where `search` says a hit lies (library/regions.py): the query's words together where they
stand together, else the first place of the query's rarest word on the page; words found as the
index finds them (accents and case folded, a hyphenated word's parts, a word broken at the line's
end); a page the index found by its cleaned text, the closest word; boxes in the master image's
pixels when the page has one."""

from __future__ import annotations

from vlmocr.library.regions import region
from vlmocr.runfolder.record import Row


def page(words: list[str], master: dict | None = None) -> Row:
    """A page of one line a word a row, each word 100 px wide and 40 px high."""
    lines = [{"box": [0, 50 * n, 100, 50 * n + 40], "words": [[0, 50 * n, 100, 50 * n + 40, 0.9, w]], "block": 0}
             for n, w in enumerate(words)]
    rec = {"doc_id": "d", "page": 1, "status": "ok", "text": " ".join(words),
           "positions": {"width": 1000, "height": 2000, "source": "tesseract", "lines": lines}}
    if master:
        rec["master"] = master
    return Row.of(rec)


def at(row: Row, query: str) -> tuple[list[str], int] | None:
    found = region(row, query)
    return (found["words"], found["box"][1] // 50) if found else None


def test_the_rarest_word_not_the_first_common_one():
    row = page(["the", "court", "and", "the", "clerk", "of", "our", "Hauptstadt", "at", "the", "end"])
    assert at(row, "the Hauptstadt") == (["Hauptstadt"], 7)
    assert at(row, "Hauptstadt the") == (["Hauptstadt"], 7)
    assert at(row, "clerk court") == (["clerk"], 4)  # both once, as long: the query's first
    assert at(row, "court Hauptstadt") == (["Hauptstadt"], 7)  # both once: the longer
    assert at(row, "the clerk") == (["the", "clerk"], 3)  # together on the page: the phrase


def test_words_match_as_the_index_matched_them():
    row = page(["Herr", "Müller", "north-west", "Haupt-", "mann", "ﬁnal"])
    assert at(row, "muller") == (["Müller"], 1)
    assert at(row, "west") == (["north-west"], 2)
    assert at(row, "hauptmann") == (["Haupt-"], 3)
    assert at(row, "final") == (["ﬁnal"], 5)
    assert at(row, "Müll*") == (["Müller"], 1)


def test_a_page_found_by_its_cleaned_text_gives_its_closest_word_and_nothing_unlike():
    row = page(["the", "Hauptrnann", "came"])
    assert at(row, "Hauptmann") == (["Hauptrnann"], 1)
    assert region(page(["nothing", "alike"]), "Hauptmann") is None
    assert region(Row.of({"doc_id": "d", "page": 1, "status": "ok", "text": "x"}), "x") is None


def test_the_box_is_in_the_master_images_pixels():
    # The page rendered 1000 x 2000 px is the master 1500 x 3000 px shifted by (30, 60).
    row = page(["the", "clerk"], {"width": 1500, "height": 3000, "dpi": [300, 300], "of": "pdf image",
                                  "map": [1500, 0, 0, 3000, -30, -60]})
    found = region(row, "clerk")
    assert found["box"] == [0, 15, 120, 75] and (found["width"], found["height"]) == (1500, 3000)
    assert found["image"] == "pdf image"

"""The house's rules held against its code on every run, not only when someone draws it: the parts
and never-rules of docs/house.json (and of docs/house-pages.json, the inside of its part Pages),
every arrow the code has between two parts drawn there and none that it lacks, no import circle
(an import made inside a function is an arrow too), the floors of the house drawn with folders as
rooms, and no module too long to read. tests/support/house.py reads the imports; `python
scripts/house.py` prints what it finds."""

from __future__ import annotations

from support.house import REPO, read_house

WHITEBOARDS = (REPO / "docs" / "house.json", REPO / "docs" / "house-pages.json")
# The rooms a chain of imports climbs through, folders as rooms (a top-level module is a room of its
# own; so are benchmarks/ and scripts/): __main__ → cli → library → reading → settings → engines →
# positions → runfolder → files → exceptions.
MAX_FLOORS = 10
MAX_MODULE_LINES = 700


def test_every_never_rule_is_kept():
    for plan in WHITEBOARDS:
        assert read_house(plan=plan).broken_nevers() == [], plan.name


def test_every_arrow_the_code_has_between_parts_is_drawn_and_every_drawn_arrow_is_real():
    for plan in WHITEBOARDS:
        house = read_house(plan=plan)
        assert house.undrawn() == [], plan.name
        assert house.drawn_but_absent() == [], plan.name


def test_every_file_stands_on_a_part():
    assert read_house().files_on_no_part() == []


def test_no_import_circle_between_files_or_folders():
    house = read_house()
    assert house.circles() == []
    assert house.room_circles() == []


def test_the_house_has_few_floors_and_no_module_too_long_to_read():
    floors, chain = read_house().floors()
    assert floors <= MAX_FLOORS, " -> ".join(chain)
    assert read_house().longest_modules(MAX_MODULE_LINES) == []


def test_a_broken_rule_a_new_circle_or_an_undrawn_arrow_is_caught():
    """Throwaway modules, as if they were files of src/: the spine reaching for the reader (from
    inside a function: a late import is still an arrow), two files importing each other, a module
    too long, a part importing one it has no arrow to."""
    house = read_house(extra={
        "vlmocr.runfolder.throwaway": "def late():\n    from ..reading import scheduler\n    return scheduler\n",
        "vlmocr.text.loop_a": "from . import loop_b\n",
        "vlmocr.text.loop_b": "def back():\n    from . import loop_a\n",
        "vlmocr.corpus.long": "x = 1\n" * (MAX_MODULE_LINES + 1) + "from ..library import catalog\n",
    })
    broken = house.broken_nevers()
    assert any("never RunFolder -> Reading" in b and "runfolder/throwaway.py:2" in b for b in broken), broken
    assert ["vlmocr.text.loop_a", "vlmocr.text.loop_b"] in house.circles()
    assert ("src/vlmocr/corpus/long.py", MAX_MODULE_LINES + 2) in house.longest_modules(MAX_MODULE_LINES)
    assert any(u.startswith("Corpus -> Library") for u in house.undrawn())

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
# Imports of vlmocr's own modules made inside a function, outside the start-up (cli/, __main__: a
# command imports only what it runs). Each defers a heavy library the imported module brings
# (tesserocr, onnxruntime, wordfreq, lxml, Chromium's driver, huggingface_hub …) or a command's
# rarely taken path. The count per file may fall, never rise: a new one is a top-level import, or
# is listed here with its reason.
LATE_IMPORTS = {
    "cluster/serve/describing.py": 4, "cluster/serve/hfjob_launch.py": 1, "cluster/serve/plan.py": 4,
    "cluster/serve/process.py": 1, "cluster/serve/running.py": 1, "cluster/slurm/__main__.py": 3,
    "cluster/slurm/describe_job.py": 1, "cluster/slurm/fetch_job.py": 1, "cluster/slurm/gate.py": 6,
    "cluster/slurm/status.py": 4, "cluster/slurm/submit.py": 1, "corpus/facts.py": 1, "corpus/placement.py": 4,
    "corpus/triage.py": 4, "engines/rapidocr.py": 1, "evaluation/score.py": 8, "evaluation/spelling.py": 1,
    "evaluation/truth.py": 1, "formats/__init__.py": 2, "formats/pdf.py": 3, "inputs/render.py": 3,
    "inputs/sources.py": 1, "library/dedup.py": 3, "library/describe.py": 2, "library/export.py": 1,
    "library/identify.py": 1, "library/publish.py": 2, "library/runs.py": 3, "profiles/__init__.py": 1,
    "reading/cascade.py": 4, "reading/client.py": 1, "reading/describe.py": 12, "reading/judging.py": 3,
    "reading/orientation.py": 5, "reading/preflight.py": 1, "reading/prepare.py": 3, "reading/scheduler.py": 4,
    "reading/vlm.py": 1, "reading/worker.py": 4, "report/gather.py": 1, "report/thumbs.py": 2,
    "runfolder/rundir.py": 2, "settings/figures.py": 2, "testing/fake_vllm.py": 1, "testing/real_vllm.py": 1,
}


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


def late_imports(house) -> dict[str, int]:
    out: dict[str, int] = {}
    for imp in house.imports:
        if imp.lazy and imp.source.startswith("src/vlmocr/") and not imp.source.startswith("src/vlmocr/cli/") \
                and imp.source != "src/vlmocr/__main__.py":
            name = imp.source.removeprefix("src/vlmocr/")
            out[name] = out.get(name, 0) + 1
    return out


def test_no_module_imports_more_of_vlmocr_late_than_it_is_allowed():
    over = {f: n for f, n in late_imports(read_house()).items() if n > LATE_IMPORTS.get(f, 0)}
    assert over == {}, ("imports of vlmocr made inside a function beyond what LATE_IMPORTS allows (make them "
                        f"top-level imports, or list them with their reason): {over}")


def test_a_new_late_import_is_caught():
    house = read_house(extra={"vlmocr.text.latecomer": "def f():\n    from . import quality\n    return quality\n"})
    assert late_imports(house).get("text/latecomer.py") == 1 and "text/latecomer.py" not in LATE_IMPORTS

"""Issue 47, points 1 and 2: the walkthrough a new user follows (docs/your-collection.md) and the
README's Quick start are what runs. Every `vlmocr` command of the walkthrough's bash blocks is run
as written, in a folder holding a copy of the bundled samples, in order; each prints what the
`#` lines under it say. And the Quick start's two set-up commands are the ones that are tested:
the first reads the samples (tests/reading/test_run.py holds its figure), the second is what CI runs."""

from __future__ import annotations

import re
import shlex
import shutil

from support.cli import run_cli
from support.components import REPO

WALKTHROUGH = REPO / "docs" / "your-collection.md"
BASH = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def steps(text: str) -> list[tuple[list[str], list[str]]]:
    """[(a command's arguments after `vlmocr`, the lines it is said to print)] of the bash blocks."""
    out: list[tuple[list[str], list[str]]] = []
    for block in BASH.findall(text):
        for line in block.splitlines():
            if line.startswith("vlmocr "):
                out.append((shlex.split(line)[1:], []))
            elif line.startswith("#   ") and out:
                out[-1][1].append(line[4:])
    return out


def test_the_walkthrough_runs_as_written_on_the_samples(tmp_path):
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    done = steps(WALKTHROUGH.read_text(encoding="utf-8"))
    assert [s[0][0] for s in done] == ["triage", "manifest", "run", "evaluate", "report", "export", "export",
                                       "publish", "search"]
    for args, said in done:
        res = run_cli(*args, cwd=tmp_path, timeout=600)
        assert res.returncode == 0, (args, res.stderr[-2000:])
        shown = " ".join((res.stdout + res.stderr).split())  # a narrow terminal wraps the lines
        for expected in said:
            assert " ".join(expected.split()) in shown, (args, expected, shown[-2000:])
    assert (tmp_path / "alto" / "scanned-typewritten.alto.xml").is_file()
    assert (tmp_path / "pdf" / "scanned-typewritten.pdf").is_file() and (tmp_path / "report" / "index.html").is_file()


def test_the_quick_start_commands_are_the_ones_tested():
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):text.index("## The workflow")]
    blocks = BASH.findall(quick)
    assert len(blocks) == 2, "a block to try it, a block to develop it"
    tried, developed = blocks
    assert "**Try it**" in quick.split(tried)[0] and "**Develop it**" in quick.split(developed)[0]
    # Try it: clone, a virtual environment, install and read the samples, then the evaluate line
    # (the figure tests/reading/test_run.py measures), with the output to expect.
    assert "git clone" in tried and "python3 -m venv" in tried
    assert "vlmocr run samples/ --out runs/first" in tried and "vlmocr evaluate runs/first --truth samples/" in tried
    assert "#   Done: 7 pages in 4 docs" in tried and re.search(r"#    all    7    0   \d+\.\d\d  ", tried)
    # Develop it: exactly what CI runs (.ci/run execs scripts/test.sh).
    assert developed.strip() == "bash scripts/test.sh"
    assert "scripts/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    # The figure shown is the one the samples give (tests/reading/test_run.py checks the prose's).
    figure = re.search(r"#    all    7    0   (\d+\.\d\d)  ", tried).group(1)
    assert f"({figure} % CER, micro)" in quick.replace("\n", " ")

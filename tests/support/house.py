"""The house as its imports draw it, held against docs/house.json: the parts (folders and files),
the arrows between them that the code really has (every import, the ones made inside functions
too), the never-rules, import circles, the floors with folders as rooms, and the longest modules.
tests/test_house.py asserts on it; `python scripts/house.py` prints it."""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "vlmocr"


@dataclass(frozen=True)
class Import:
    source: str  # a file, relative to the repository
    target: str
    line: int
    lazy: bool  # made inside a function (a late import: still an arrow)


@dataclass
class House:
    root: Path
    modules: dict[str, Path]  # dotted name → file
    imports: list[Import]
    parts: dict[str, list[str]]  # part → the paths it is ("folder/" or a file)
    arrows: set[tuple[str, str]]  # drawn in house.json
    never: list[tuple[str, str, str]]
    lines: dict[str, int] = field(default_factory=dict)  # file → lines

    # ------------------------------------------------------------------ parts and arrows

    def part_of(self, path: str) -> str | None:
        best: tuple[int, str] | None = None
        for part, paths in self.parts.items():
            for p in paths:
                if path == p or (p.endswith("/") and path.startswith(p)):
                    if best is None or len(p) > best[0]:
                        best = (len(p), part)
        return best[1] if best else None

    def part_imports(self) -> dict[tuple[str, str], list[Import]]:
        """(part, part) → the imports behind that arrow."""
        out: dict[tuple[str, str], list[Import]] = defaultdict(list)
        for imp in self.imports:
            a, b = self.part_of(imp.source), self.part_of(imp.target)
            if a and b and a != b:
                out[(a, b)].append(imp)
        return out

    def broken_nevers(self) -> list[str]:
        by_arrow = self.part_imports()
        out = []
        for a, b, why in self.never:
            for imp in by_arrow.get((a, b), []):
                out.append(f"never {a} -> {b} ({why}): {imp.source}:{imp.line} imports {imp.target}")
        return out

    def undrawn(self) -> list[str]:
        return [f"{a} -> {b}: {imps[0].source}:{imps[0].line} imports {imps[0].target} (and {len(imps) - 1} more)"
                for (a, b), imps in sorted(self.part_imports().items()) if (a, b) not in self.arrows]

    def drawn_but_absent(self) -> list[tuple[str, str]]:
        return sorted(self.arrows - set(self.part_imports()))

    def files_on_no_part(self) -> list[str]:
        return sorted(f for f in {str(p.relative_to(self.root)) for p in self.modules.values()}
                      if self.part_of(f) is None)

    # ------------------------------------------------------------------ circles and floors

    def _module_graph(self) -> dict[str, set[str]]:
        by_file = {str(p.relative_to(self.root)): m for m, p in self.modules.items()}
        g: dict[str, set[str]] = {m: set() for m in self.modules}
        for imp in self.imports:
            a, b = by_file[imp.source], by_file[imp.target]
            # a package importing its own parts, or a part its package: the package's face, no circle
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                g[a].add(b)
        return g

    def circles(self) -> list[list[str]]:
        """Files that import each other in a loop (imports inside functions count)."""
        return _cycles(self._module_graph())

    def room(self, module: str) -> str:
        """A room as the house is drawn with folders as rooms: a top-level folder of the package,
        a top-level module, or a folder of the repository (benchmarks/, scripts/)."""
        parts = module.split(".")
        if parts[0] != PACKAGE:
            return parts[0]
        if len(parts) == 1:
            return PACKAGE
        return parts[1]

    def room_graph(self) -> dict[str, set[str]]:
        g: dict[str, set[str]] = defaultdict(set)
        for a, targets in self._module_graph().items():
            ra = self.room(a)
            g[ra]
            for b in targets:
                rb = self.room(b)
                if rb != ra and rb != PACKAGE:
                    g[ra].add(rb)
        return dict(g)

    def room_circles(self) -> list[list[str]]:
        return _cycles(self.room_graph())

    def floors(self) -> tuple[int, list[str]]:
        """The number of floors (a room stands above everything it imports; the ground is floor 1)
        and the longest chain of rooms; the house must have no room circle."""
        g = self.room_graph()
        memo: dict[str, list[str]] = {}

        def chain(r: str) -> list[str]:
            if r not in memo:
                memo[r] = [r] + max((chain(d) for d in g.get(r, ())), key=len, default=[])
            return memo[r]

        longest = max((chain(r) for r in g), key=len, default=[])
        return len(longest), longest

    def longest_modules(self, limit: int) -> list[tuple[str, int]]:
        return sorted(((f, n) for f, n in self.lines.items() if n > limit and f.startswith("src/")),
                      key=lambda x: -x[1])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _modules(root: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for p in sorted((root / "src").rglob("*.py")):
        parts = list(p.relative_to(root / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    for folder in ("benchmarks", "scripts"):
        for p in sorted((root / folder).glob("*.py")):
            mods[f"{folder}.{p.stem}"] = p
    return mods


def _imports_of(module: str, path: Path, text: str, mods: dict[str, Path], root: Path) -> list[Import]:
    tree = ast.parse(text, str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rsplit(".", 1)[0]
    local = module.split(".")[0] if module.split(".")[0] in ("benchmarks", "scripts") else None
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)

    def known(name: str) -> str | None:
        if local and f"{local}.{name}" in mods:  # a benchmark importing its neighbour
            return f"{local}.{name}"
        while name:
            if name in mods:
                return name
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return None

    out = []
    source = str(path.relative_to(root))
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [t for a in node.names if (t := known(a.name))]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            for a in node.names:
                t = known(f"{stem}.{a.name}") if f"{stem}.{a.name}" in mods else known(stem)
                if t:
                    targets.append(t)
        for t in dict.fromkeys(targets):
            if t != module:
                out.append(Import(source, str(mods[t].relative_to(root)), node.lineno, id(node) in inside))
    return out


@lru_cache(maxsize=4)
def _tree(root: Path, extra: tuple[tuple[str, str], ...]) -> tuple[dict[str, Path], list[Import], dict[str, int]]:
    """The modules of the tree at `root` (and `extra`'s), their imports and their lines: parsed
    once for every whiteboard held against them."""
    mods = _modules(root)
    texts = {m: p.read_text(encoding="utf-8") for m, p in mods.items()}
    for name, text in extra:
        mods[name] = root / "src" / Path(*name.split(".")).with_suffix(".py")
        texts[name] = text
    imports: list[Import] = []
    for m, p in mods.items():
        imports += _imports_of(m, p, texts[m], mods, root)
    return mods, imports, {str(p.relative_to(root)): texts[m].count("\n") for m, p in mods.items()}


def read_house(root: Path = REPO, plan: Path | None = None, extra: dict[str, str] | None = None) -> House:
    """The house of the repository at `root`, held against `plan` (docs/house.json). `extra` adds
    modules (dotted name → source text) as if they were files of src/: a throwaway module."""
    mods, imports, lines = _tree(root, tuple(sorted((extra or {}).items())))
    data = json.loads((plan or root / "docs" / "house.json").read_text(encoding="utf-8"))
    return House(root, dict(mods), list(imports), {k: v["is"] for k, v in data["parts"].items()},
                 {(a[0], a[1]) for a in data["arrows"]}, [(n[0], n[1], n[2]) for n in data["never"]], lines)

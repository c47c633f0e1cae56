"""The import graph of src/vlmocr: import circles (module level, and with the imports made inside
functions) and floors (the longest chain of module-level imports), plus the largest modules.
docs/DESIGN.md keeps the floors at 9 or fewer and no circle.

    python scripts/import_floors.py"""
import ast
import sys
from pathlib import Path
SRC = Path(__file__).resolve().parents[1] / "src"
mods = {}
for p in SRC.rglob("*.py"):
    rel = p.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg: parts = parts[:-1]
    mods[".".join(parts)] = (p, is_pkg)
edges = {m: set() for m in mods}
lazy = {m: set() for m in mods}
for m, (p, is_pkg) in mods.items():
    pkg = m if is_pkg else m.rsplit(".", 1)[0]
    tree = ast.parse(p.read_text())
    def add(target, top):
        while target and target not in mods:
            target = target.rsplit(".", 1)[0] if "." in target else None
        if target and target != m:
            (edges if top else lazy)[m].add(target)
    for node in ast.walk(tree):
        top = node in tree.body or any(node in getattr(b, "body", []) for b in tree.body if isinstance(b, (ast.If, ast.Try)))
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                tgt = ".".join(base + ([node.module] if node.module else []))
            else:
                tgt = node.module or ""
            if not tgt.startswith("vlmocr"): continue
            for a in node.names:
                full = tgt + "." + a.name
                add(full if full in mods else tgt, top)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("vlmocr"): add(a.name, top)
# floors over top-level edges
sys.setrecursionlimit(10000)
memo = {}
def floor(m, stack=()):
    if m in stack: return 0
    if m in memo: return memo[m]
    f = 1 + max((floor(d, stack + (m,)) for d in edges[m]), default=0)
    memo[m] = f
    return f
# cycles (all edges incl lazy)
def cycles(graph):
    index = {}; low = {}; st = []; on = set(); out = []; i = [0]
    def sc(v):
        index[v] = low[v] = i[0]; i[0] += 1; st.append(v); on.add(v)
        for w in graph[v]:
            if w not in index: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in graph:
        if v not in index: sc(v)
    return out
allg = {m: edges[m] | lazy[m] for m in mods}
# ignore package -> own submodule edges (package __init__ importing its parts)
def strip(g):
    return {m: {d for d in ds if not d.startswith(m + ".") and not m.startswith(d + ".")} for m, ds in g.items()}
print("cycles (top-level):", cycles(strip(edges)))
print("cycles (with lazy):", cycles(strip(allg)))
fl = {m: floor(m) for m in mods}
print("max floor:", max(fl.values()))
chain = max(fl, key=fl.get)
m = chain; path = [m]
while edges[m]:
    m = max(edges[m], key=lambda d: fl[d]); path.append(m)
print("deepest chain:", " -> ".join(path))
big = sorted(((sum(1 for _ in p.open()), m) for m, (p, _) in mods.items()), reverse=True)[:8]
print("largest:", big)

#!/usr/bin/env python3
"""Module import graph of src/ and crates/*/src/ (crate::, super:: and hpa_bridge_<crate>:: paths), at file-module
and top-level granularity; prints cycles. No two crates hold a module of the same name, so the trees share one
module namespace here; Cargo already keeps each crate from importing the ones above it.
Test-only code (inline `#[cfg(test)] mod tests`, and modules declared under `#[cfg(test)]`) is left out:
a test may reach across layers to check that they agree."""
import os, re, sys
roots = [a for a in sys.argv[1:] if not a.startswith("-")] or ["src"] + sorted(os.path.join("crates", c, "src") for c in os.listdir("crates"))
def modname(path, root):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib", "main"): parts = parts[:-1]
    return "::".join(parts)
mods = {}
for root in roots:
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f); mods[modname(p, root)] = p
names = set(mods)
test_only = set()
for m, p in mods.items():
    for mm in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod ([a-z_][a-z0-9_]*);", open(p).read()):
        test_only.add((m + "::" if m else "") + mm.group(1))
def is_test(m):
    return any(m == t or m.startswith(t + "::") for t in test_only)
mods = {m: p for m, p in mods.items() if not is_test(m)}
def resolve(path):
    segs = path.split("::")
    for i in range(len(segs), 0, -1):
        c = "::".join(segs[:i])
        if c in names: return c
    return None
edges = {m: set() for m in mods}
for m, p in mods.items():
    src = open(p).read()
    # drop test modules: everything after a line '#[cfg(test)]' followed by 'mod tests'
    src = re.split(r"#\[cfg\(test\)\]\s*mod tests", src)[0]
    src = re.sub(r"//[^\n]*", "", src)
    for mm in re.finditer(r"(?:\bcrate|\bhpa_bridge_(?:exposition|rules|store|sources|engine|hpa_model|server|duties))::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", src):
        t = resolve(mm.group(1))
        if t and t != m and not m.startswith(t + "::"): edges[m].add(t)
    for mm in re.finditer(r"\buse super::((?:[a-z_][a-z0-9_]*::)*[a-z_A-Z0-9]*)", src):
        base = m.rsplit("::", 1)[0] if "::" in m else ""
        if p.endswith("mod.rs"): base = m.rsplit("::",1)[0] if "::" in m else ""
        full = (base + "::" + mm.group(1)) if base else mm.group(1)
        t = resolve(full)
        if t and t != m and not m.startswith(t + "::"): edges[m].add(t)
def sccs(g):
    idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def go(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in idx: go(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            s = []
            while True:
                w = st.pop(); on.discard(w); s.append(w)
                if w == v: break
            out.append(s)
    for v in g:
        if v not in idx: go(v)
    return [s for s in out if len(s) > 1]
top = {}
for m, ts in edges.items():
    a = m.split("::")[0]
    top.setdefault(a, set())
    for t in ts:
        b = t.split("::")[0]
        if a != b: top[a].add(b)
fc, tc = sccs(edges), sccs(top)
print("file-module cycles:", fc or "none")
print("top-level cycles:", tc or "none")
if "-v" in sys.argv:
    for a in sorted(top): print(f"  {a} -> {', '.join(sorted(top[a]))}")
sys.exit(1 if fc or tc else 0)

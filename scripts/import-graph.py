#!/usr/bin/env python3
"""Module import graph of every crate in src/ (the library, and each binary under src/bin/) and
crates/*/src/ (crate::, super:: and hpa_bridge[_<crate>]:: paths), at file-module and top-level
granularity; prints cycles. A module is named by its crate and path (`hpa_bridge_store::store::read`),
so two crates may hold modules of the same name; Cargo already keeps each crate from importing the
ones above it. Test-only code (inline `#[cfg(test)] mod tests`, and modules declared under
`#[cfg(test)]`) is left out: a test may reach across layers to check that they agree."""
import os, re, sys
args = [a for a in sys.argv[1:] if not a.startswith("-")]
# (crate name, source root, files to leave out: a binary's files are not the library's)
crates = [("hpa_bridge", "src", "src/bin")]
if os.path.isdir("src/bin"):
    for b in sorted(os.listdir("src/bin")):
        crates.append(("bin_" + b.replace("-", "_").removesuffix(".rs"), os.path.join("src/bin", b), None))
crates += [(c.replace("-", "_"), os.path.join("crates", c, "src"), None) for c in sorted(os.listdir("crates"))]
if args: crates = [c for c in crates if c[1] in args or c[0] in args]
crate_names = {c[0] for c in crates}
def modname(path, root, crate):
    rel = os.path.relpath(path, root)[:-3] if os.path.isdir(root) else ""
    parts = [x for x in rel.split(os.sep) if x]
    if parts and parts[-1] in ("mod", "lib", "main"): parts = parts[:-1]
    return "::".join([crate] + parts)
mods = {}
for crate, root, skip in crates:
    files = [root] if root.endswith(".rs") else [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
    for path in files:
        if skip and path.startswith(skip + os.sep): continue
        mods[modname(path, root, crate)] = path
names = set(mods)
test_only = set()
for m, p in mods.items():
    for mm in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod ([a-z_][a-z0-9_]*);", open(p).read()):
        test_only.add(m + "::" + mm.group(1))
def is_test(m):
    return any(m == t or m.startswith(t + "::") for t in test_only)
mods = {m: p for m, p in mods.items() if not is_test(m)}
def resolve(path):
    segs = path.split("::")
    for i in range(len(segs), 1, -1):
        c = "::".join(segs[:i])
        if c in names: return c
    return None
edges = {m: set() for m in mods}
for m, p in mods.items():
    own = m.split("::")[0]
    src = open(p).read()
    # drop test modules: everything after a line '#[cfg(test)]' followed by 'mod tests'
    src = re.split(r"#\[cfg\(test\)\]\s*mod tests", src)[0]
    src = re.sub(r"//[^\n]*", "", src)
    for mm in re.finditer(r"\b(crate|hpa_bridge(?:_[a-z_]+)?)::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", src):
        krate = own if mm.group(1) == "crate" else mm.group(1)
        if krate not in crate_names: continue
        t = resolve(krate + "::" + mm.group(2))
        if t and t != m and not m.startswith(t + "::"): edges[m].add(t)
    for mm in re.finditer(r"\buse super::((?:[a-z_][a-z0-9_]*::)*[a-z_A-Z0-9]*)", src):
        base = m.rsplit("::", 1)[0]
        t = resolve(base + "::" + mm.group(1))
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
def top_of(m):
    return "::".join(m.split("::")[:2])
for m, ts in edges.items():
    a = top_of(m)
    top.setdefault(a, set())
    for t in ts:
        b = top_of(t)
        if a != b: top[a].add(b)
fc, tc = sccs(edges), sccs(top)
print("file-module cycles:", fc or "none")
print("top-level cycles:", tc or "none")
if "-v" in sys.argv:
    for a in sorted(top): print(f"  {a} -> {', '.join(sorted(top[a]))}")
sys.exit(1 if fc or tc else 0)

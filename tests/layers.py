#!/usr/bin/env python3
"""The layering of lib/, checked (make check runs it through tests/layers.sh).

Three rules, from the bottom layer up (LAYERS):
  include  a file includes headers of its own folder or of folders below it;
  engine   MPI and NCCL (their headers, MPI_* and nccl* names) appear only where
           they are the engine: lib/backend/, the NCCL loader (lib/mem/cuda_libs.*),
           the manager's MPI start-up (manager.c, startup.h, topology.c,
           settings_agree.c, launch_advice.c) and the distmgr/mpi.h adapters
           (lib/manager/mpi_adapters.c);
  call     no file uses a symbol defined in a higher layer, and
  circle   no files call each other in a circle (both from the symbols of the
           built objects: file A -> file B when A uses a symbol B defines).
What the tree still breaks is listed in tests/layers.known, one finding per
line: the check fails on any finding not listed there (a new violation) and on
any listed line that no longer occurs (fixed: delete the line), so the list
only shrinks.

Usage: layers.py SRCDIR [BUILDDIR]   (circles need BUILDDIR's objects)
       layers.py SRCDIR BUILDDIR --list   (print every finding)"""
import os
import re
import subprocess
import sys

LAYERS = ["core", "launch", "store", "mem", "group", "backend", "manager", "coll", "mapping", "optim", "reducer", "rpc",
          "fft", "models"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# The manager's MPI start-up (initialize and what only it calls) and the
# public distmgr/mpi.h adapters stay on MPI: they are MPI's side of the manager.
ENGINE_PLACES = ("lib/backend/", "lib/mem/cuda_libs.", "lib/manager/manager.c", "lib/manager/startup.h",
                 "lib/manager/topology.c", "lib/manager/settings_agree.c", "lib/manager/launch_advice.c",
                 "lib/manager/mpi_adapters.c")
ENGINE = re.compile(r"#\s*include\s*<(?:mpi|nccl)\.h>|\bMPI_[A-Za-z]\w*|\bnccl[A-Z]\w*")
INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "lib" and len(parts) > 2:
        return parts[1]
    return parts[0] if parts[0] in RANK else None


def sources(src):
    out = []
    for top in ("lib", "fft", "models"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if re.search(r"\.(c|h|cu|cpp)$", f):
                    out.append(os.path.relpath(os.path.join(root, f), src))
    return sorted(out)


def code_only(text):
    """Comments and string literals blanked (an MPI_ in a message is not a call)."""
    def blank(m):  # same length, newlines kept: positions stay valid
        return re.sub(r"[^\n]", " ", m.group(0))
    # keep #include "..." lines (an #include "mpi.h" counts)
    keep = {m.start(): m.group(0) for m in INCLUDE.finditer(text)}
    out = COMMENT_OR_STRING.sub(blank, text)
    for pos, s in keep.items():
        out = out[:pos] + s + out[pos + len(s):]
    return out


def lib_headers(src):
    names = {}
    for p in sources(src):
        if p.startswith("lib/") and p.endswith(".h"):
            names.setdefault(os.path.basename(p), []).append(p)
    return names


def include_findings(src, files):
    found = []
    headers = lib_headers(src)
    for p in files:
        mine = layer_of(p)
        if mine is None:
            continue
        for m in INCLUDE.finditer(open(os.path.join(src, p)).read()):
            inc = m.group(1)
            first = inc.split("/")[0]
            if "/" not in inc and inc in headers and not os.path.exists(os.path.join(src, os.path.dirname(p), inc)):
                found.append(f"include {p} -> {inc} (not by its folder)")
            elif "/" in inc and first in RANK and RANK[first] > RANK[mine]:
                found.append(f"include {p} -> {inc}")
    return found


def engine_findings(src, files):
    found = []
    for p in files:
        if p.startswith(ENGINE_PLACES):
            continue
        hits = sorted(set(m.group(0) for m in ENGINE.finditer(code_only(open(os.path.join(src, p)).read()))))
        if hits:
            found.append(f"engine {p}")
    return found


def objects(build, src):
    """Each lib/fft object of the library (libtool's PIC copies), by source
    name; objects of sources that moved or went away are left out."""
    objs = {}
    for top in ("lib", "fft"):
        for root, _, files in os.walk(os.path.join(build, top)):
            if os.path.basename(root) != ".libs":
                continue
            rel = os.path.relpath(os.path.dirname(root), build)
            if rel == "lib":
                continue  # lib/.libs holds the library itself (and stale objects of old layouts)
            for f in files:
                name = f"{rel}/{f[:-2]}"
                if f.endswith(".o") and any(os.path.exists(os.path.join(src, name + e)) for e in (".c", ".cu", ".cpp")):
                    objs[name] = os.path.join(root, f)
    return objs


def symbols(path):
    out = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        (used if f[1] in "U" else defined if f[1] in "TDBRCVWG" else set()).add(f[0])
    return defined, used


def circles(build, src):
    objs = objects(build, src)
    if not objs:
        return None
    table = {name: symbols(path) for name, path in objs.items()}
    owner = {}
    for name, (defined, _) in table.items():
        for s in defined:
            owner[s] = name
    edges = {name: sorted({owner[s] for s in used if s in owner and owner[s] != name})
             for name, (_, used) in table.items()}
    up = []
    for name, targets in sorted(edges.items()):
        for t in targets:
            if RANK[layer_of(t)] > RANK[layer_of(name)]:
                names = sorted(s for s in table[name][1] if owner.get(s) == t)
                up.append(f"call {name} -> {t} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")
    # Tarjan's strongly connected components
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return up + [f"circle {' '.join(c)}" for c in sorted(comps)]


def fit_build(line, built):
    """A known call or circle as this build can show it (None: it cannot)."""
    kind, rest = line.split(" ", 1)
    if kind == "call":
        a, _, b = rest.split(" ")[:3]
        return line if a in built and b in built else None
    if kind == "circle":
        members = [m for m in rest.split() if m in built]
        return f"circle {' '.join(members)}" if len(members) > 1 else None
    return line


def every_source_built(src, files, built):
    return all(os.path.splitext(p)[0] in built for p in files
               if p.endswith((".c", ".cu", ".cpp")) and not p.startswith("models/"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    src = args[0]
    build = args[1] if len(args) > 1 else None
    files = sources(src)
    found = include_findings(src, files) + engine_findings(src, files)
    circ = circles(build, src) if build else None
    if circ is None:
        print("layers: no built objects: the call and circle rules are not checked")
    else:
        found += circ
    if "--list" in sys.argv:
        print("\n".join(found))
        return 0
    known_path = os.path.join(src, "tests", "layers.known")
    known = [l.strip() for l in open(known_path) if l.strip() and not l.startswith("#")]
    if circ is None:
        known = [k for k in known if not k.startswith(("call ", "circle "))]
    else:  # a build without CUDA lacks some objects: their findings cannot occur
        built = set(objects(build, src))
        known = [k for k in (fit_build(k, built) for k in known) if k]
    new = [f for f in found if f not in known]
    gone = [k for k in known if k not in found]
    if circ is not None and not every_source_built(src, files, built):
        # some code is compiled out here (no CUDA): a call it would make is not "fixed"
        gone = [k for k in gone if not k.startswith(("call ", "circle "))]
    for f in new:
        print(f"layers: NEW {f}")
    for k in gone:
        print(f"layers: FIXED {k} (delete its line from tests/layers.known)")
    kinds = {k.split()[0] for k in known}
    print("layers: %d files; still listed in tests/layers.known: %s" %
          (len(files), ", ".join(f"{sum(k.startswith(t + ' ') for k in known)} {t}" for t in sorted(kinds)) or "none"))
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks the include graph of sextant's C++ and CUDA sources.

Three rules (docs/DESIGN.md, "The layers"):

1. Layers: a file includes only its own layer and the layers below it,
   app -> suites -> kernels -> harness, and reference -> harness. Suites may
   read the reference (it is their yardstick); kernels and the reference
   never read each other, except that a kernel's unit test may compare with
   the reference. Nothing includes app/ but app/.
2. Folders: the folders under kernels/ (ops, attention, moe, ...) depend on
   each other without a cycle.
3. Modules: a module is a file name without its extension (x.h, x.cc and
   x.cu are one module); modules depend on each other without a cycle, so
   inside a folder no include points back up.

  python3 scripts/check_includes.py [ROOT]

Prints every violation with the include that makes it, exits 1 if there is
one, 0 otherwise.
"""
import os
import re
import sys
from collections import defaultdict

SOURCE_DIRS = ("app", "suites", "kernels", "harness", "reference")
EXTENSIONS = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# Which top-level folders each may include (besides itself).
ALLOWED = {
    "app": {"suites", "kernels", "harness", "reference"},
    "suites": {"kernels", "harness", "reference"},
    "kernels": {"harness"},
    "reference": {"harness"},
    "harness": set(),
}


def sources(root):
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(EXTENSIONS):
                    path = os.path.relpath(os.path.join(dirpath, name), root)
                    yield path.replace(os.sep, "/")


def includes(root, path):
    out = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                out.append((m.group(1), number))
    return out


def module_of(path):
    return os.path.splitext(path)[0]


def is_test(path):
    stem = os.path.basename(module_of(path))
    return stem.endswith("_test") or "/testing/" in path


def kernel_folder(path):
    parts = path.split("/")
    return parts[1] if parts[0] == "kernels" and len(parts) > 2 else None


def strongly_connected(graph):
    """The components of more than one node (Tarjan), each sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycle_in(graph, component):
    """One cycle through the component's first node, staying inside it."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                return paths[v] + [start]
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return component + [start]


def check(root):
    files = list(sources(root))
    known = set(files)
    problems = []
    modules = defaultdict(set)
    folders = defaultdict(set)
    why = {}  # (from, to) edge -> "file:line includes header"
    for path in files:
        top = path.split("/")[0]
        for header, line in includes(root, path):
            if header not in known:
                continue  # a system, generated or third-party header
            where = f"{path}:{line} includes {header}"
            target = header.split("/")[0]
            allowed = ALLOWED[top] | {top}
            if top == "kernels" and is_test(path):
                allowed = allowed | {"reference"}
            if target not in allowed:
                problems.append(f"layer: {where} ({top} may include only {', '.join(sorted(allowed))})")
            a, b = module_of(path), module_of(header)
            if a != b:
                modules[a].add(b)
                why.setdefault((a, b), where)
            fa, fb = kernel_folder(path), kernel_folder(header)
            if fa and fb and fa != fb:
                folders[fa].add(fb)
                why.setdefault((fa, fb), where)
    for kind, graph in (("folder", folders), ("module", modules)):
        for component in strongly_connected(graph):
            cycle = cycle_in(graph, component)
            steps = "; ".join(why[(a, b)] for a, b in zip(cycle, cycle[1:]))
            problems.append(f"{kind} cycle: {' -> '.join(cycle)} ({steps})")
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_includes: {len(problems)} problem(s)")
        return 1
    print("check_includes: layers, kernel folders and modules are acyclic and point down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

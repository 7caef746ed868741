#!/usr/bin/env python3
"""The layers inside the KVOServer target, which the compiler cannot check (one module): exits 1, naming each
offence, when a file of one folder of Sources/KVOServer names a type declared at the top level of a folder its
layer may not use (docs/design.md, "Layers"). The allowed graph below is acyclic (checked too), so a cycle
between folders cannot come back unnoticed.

A reference is a capitalised identifier outside comments and string literals that is the name of a type
declared at the top level of exactly one folder (names declared in more than one place, nested ones included,
are ambiguous and skipped). `extension` blocks do not declare. Run by scripts/check-layers.sh (CI).

    python3 scripts/check-folder-layers.py            # check
    python3 scripts/check-folder-layers.py --graph    # print the folder graph as it is, with the types behind each edge
"""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "KVOServer")

# Folder -> the folders it may use. HTTP and Transport are one layer: the HTTP and WebSocket framings are stages
# of a connection, and the connection hands HTTP requests to its delegate.
ALLOWED = {
    "Support": set(),
    "Security": {"Support"},
    "Presence": {"Support"},
    "Protocol": {"Presence", "Security", "Support"},
    "Transport": {"HTTP", "Protocol", "Security", "Support"},
    "HTTP": {"Transport", "Protocol", "Security", "Support"},
    "Metrics": {"Transport", "HTTP", "Protocol", "Support"},
    "Storage": {"Presence", "Security", "Support"},
    "Cluster": {"Storage", "Protocol", "Presence", "Security", "Support"},
    "Server": {"Cluster", "Storage", "Metrics", "Transport", "HTTP", "Protocol", "Presence", "Security", "Support"},
}
# Folders that count as one node when the allowed graph is checked for cycles.
LAYERS = {"HTTP": "Transport"}

DECLARATION = re.compile(
    r"^([ \t]*)(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|private|fileprivate|internal|final|indirect|nonisolated)\s+)*"
    r"(?:class|struct|enum|protocol|typealias|actor)\s+([A-Z]\w*)", re.M)
IDENTIFIER = re.compile(r"\b([A-Z]\w*)\b")


def strip(text):
    text = re.sub(r'"""[\s\S]*?"""', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def main():
    files = {}
    top_level = collections.defaultdict(set)
    declared = collections.Counter()
    for directory, _, names in os.walk(ROOT):
        for name in names:
            if not name.endswith(".swift"):
                continue
            path = os.path.join(directory, name)
            folder = os.path.relpath(directory, ROOT).split(os.sep)[0]
            with open(path, encoding="utf-8") as handle:
                text = strip(handle.read())
            files[path] = (folder, text)
            for match in DECLARATION.finditer(text):
                declared[match.group(2)] += 1
                if match.group(1) == "":
                    top_level[match.group(2)].add(folder)
    owner = {name: next(iter(folders)) for name, folders in top_level.items() if len(folders) == 1 and declared[name] == 1}
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for path, (folder, text) in files.items():
        for name in set(IDENTIFIER.findall(text)):
            target = owner.get(name)
            if target and target != folder:
                edges[folder][target].add((name, os.path.relpath(path, os.path.join(ROOT, "..", ".."))))
    if "--graph" in sys.argv[1:]:
        for folder in sorted(edges):
            for target in sorted(edges[folder]):
                print(f"{folder} -> {target}: {', '.join(sorted({name for name, _ in edges[folder][target]}))}")
        return 0
    failed = False
    for folder in sorted(set(ALLOWED) | set(edges)):
        if folder not in ALLOWED:
            print(f"check-layers: Sources/KVOServer/{folder} is a folder the layer table does not know: add it to "
                  f"scripts/check-folder-layers.py and docs/design.md", file=sys.stderr)
            failed = True
            continue
        for target, uses in sorted(edges[folder].items()):
            if target not in ALLOWED[folder]:
                for name, path in sorted(uses):
                    print(f"check-layers: {path} ({folder}) uses {name} ({target}): {folder} may use "
                          f"{', '.join(sorted(ALLOWED[folder])) or 'no other folder'}", file=sys.stderr)
                failed = True
    # The allowed graph itself must stay acyclic (layers merged).
    graph = collections.defaultdict(set)
    for folder, targets in ALLOWED.items():
        for target in targets:
            a, b = LAYERS.get(folder, folder), LAYERS.get(target, target)
            if a != b:
                graph[a].add(b)
    state = {}

    def visit(node, trail):
        if state.get(node) == 1:
            print(f"check-layers: the allowed folder graph has a cycle: {' -> '.join(trail + [node])}", file=sys.stderr)
            return True
        if state.get(node) == 2:
            return False
        state[node] = 1
        cyclic = any(visit(next_node, trail + [node]) for next_node in sorted(graph[node]))
        state[node] = 2
        return cyclic

    if any(visit(node, []) for node in sorted(graph)):
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

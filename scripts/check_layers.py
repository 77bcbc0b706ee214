#!/usr/bin/python3
"""Fails when a source file includes a header of a layer it may not use.

The rules are the ```layers block of docs/architecture.md: one line per folder, then the folders
its files may include besides their own ("*" = any). A folder's rule covers its subfolders unless
they have a line of their own; the longest matching folder wins. Only quoted includes are checked
("store/node/store_node.h"); <...> includes are system and library headers.

Usage: scripts/check_layers.py [REPO_ROOT]. Prints one line per violation; exit 1 if any.
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCES = ("src", "python/bindings")


def read_rules(doc: pathlib.Path) -> dict[str, set[str]]:
    block = re.search(r"^```layers\n(.*?)^```", doc.read_text(), re.MULTILINE | re.DOTALL)
    if block is None:
        sys.exit(f"{doc}: no ```layers block")
    rules = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            folder, *allowed = line.split()
            rules[folder] = set(allowed) - {"-"}
    return rules


def layer_of(folder: str, rules: dict[str, set[str]]) -> str | None:
    """The longest folder in `rules` that is `folder` or one of its parents."""
    parts = folder.split("/")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n])
        if candidate in rules:
            return candidate
    return None


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    rules = read_rules(root / "docs/architecture.md")
    problems = []
    files = [p for top in SOURCES for p in sorted((root / top).rglob("*"))
             if p.suffix in (".h", ".cc", ".cu")]
    for path in files:
        rel = path.relative_to(root)
        # src/store/node/x.cc -> store/node; python/bindings/x.cc -> python/bindings
        folder = str(rel.parent.relative_to("src")) if rel.parts[0] == "src" else str(rel.parent)
        mine = layer_of(folder, rules)
        if mine is None:
            problems.append(f"{rel}: folder '{folder}' has no line in the layers table")
            continue
        text = path.read_text()
        for match in INCLUDE.finditer(text):
            header = match.group(1)
            if "/" not in header:
                continue  # a header beside the file
            theirs = layer_of(str(pathlib.PurePosixPath(header).parent), rules)
            if theirs is None:
                problems.append(f"{rel}: includes \"{header}\", which is in no layer")
            elif theirs != mine and "*" not in rules[mine] and theirs not in rules[mine]:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{rel}:{line}: '{mine}' may not include \"{header}\" "
                                f"('{theirs}'); allowed: {' '.join(sorted(rules[mine])) or 'none'}")
    for p in problems:
        print(p)
    print(f"check_layers: {len(files)} files, {len(problems)} violations", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

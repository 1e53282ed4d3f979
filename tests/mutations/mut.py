#!/usr/bin/env python3
"""Read a mutation file (format in tests/mutations/README.md) and apply it.

  mut.py FILE.mut tests|file|promise    print that field (tests one a line)
  mut.py FILE.mut apply TREE            mutate TREE/<file>, keep the original
  mut.py FILE.mut restore TREE          put the original back
  mut.py --check DIR                    parse every DIR/*.mut, report problems
"""
import os
import sys

FIELDS = ("promise", "file", "tests")


def parse(path):
    m = {"search": None, "replace": None}
    block = None
    lines = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for line in text.split("\n"):
        if line in ("--- search", "--- replace"):
            if block:
                m[block] = "\n".join(lines)
            block, lines = line[4:], []
        elif block:
            lines.append(line)
        elif line.startswith("#") or not line.strip():
            continue
        else:
            key, sep, value = line.partition(":")
            if not sep or key.strip() not in FIELDS:
                raise ValueError(f"{path}: unknown line {line!r} (expected {', '.join(FIELDS)}, --- search, --- replace)")
            m[key.strip()] = value.strip()
    if block:
        # The file's last newline ends the block, it is not part of it.
        if lines and lines[-1] == "":
            lines.pop()
        m[block] = "\n".join(lines)
    for k in FIELDS + ("search",):
        if not m.get(k):
            raise ValueError(f"{path}: no {k}")
    if m["replace"] is None:
        raise ValueError(f"{path}: no --- replace block")
    if m["search"] == m["replace"]:
        raise ValueError(f"{path}: the replacement equals the search text")
    m["tests"] = m["tests"].split()
    return m


def orig_path(tree):
    return os.path.join(os.path.dirname(os.path.abspath(tree)), "mutant.orig")


def apply(m, tree):
    target = os.path.join(tree, m["file"])
    try:
        with open(target, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"{m['file']}: {e.strerror}")
    n = text.count(m["search"])
    if n != 1:
        sys.exit(f"the search text occurs {n} times in {m['file']} (must be exactly once)")
    with open(orig_path(tree), "w", encoding="utf-8") as f:
        f.write(text)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace(m["search"], m["replace"]))


def restore(m, tree):
    target = os.path.join(tree, m["file"])
    os.replace(orig_path(tree), target)
    # The original was saved before the mutation was written, so it is older
    # than what ninja built from the mutation: date it now, or ninja keeps
    # the mutated object.
    os.utime(target, None)


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        bad = 0
        for name in sorted(os.listdir(argv[2])):
            if name.endswith(".mut"):
                try:
                    parse(os.path.join(argv[2], name))
                except ValueError as e:
                    print(e)
                    bad += 1
        return 1 if bad else 0
    m = parse(argv[1])
    what = argv[2]
    if what == "tests":
        print("\n".join(m["tests"]))
    elif what in ("file", "promise"):
        print(m[what])
    elif what == "apply":
        apply(m, argv[3])
    elif what == "restore":
        restore(m, argv[3])
    else:
        sys.exit(f"mut.py: unknown action {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Seeds fuzz_patch (tests/fuzz/corpus/patch/) from the corpus here: for
each case, the first input file's bytes, a NUL, the patch (the input
format of tests/fuzz/fuzz_patch.c).  Run it after adding cases."""
import os
import pathlib

here = pathlib.Path(__file__).resolve().parent
out = here.parent / "fuzz" / "corpus" / "patch"
out.mkdir(parents=True, exist_ok=True)
for old in out.iterdir():
    old.unlink()
for case in sorted((here / "corpus").iterdir()):
    files = sorted(p for p in (case / "in").rglob("*") if p.is_file()) if (case / "in").is_dir() else []
    first = files[0].read_bytes() if files else b""
    (out / case.name).write_bytes(first + b"\0" + (case / "patch").read_bytes())

#!/usr/bin/env python3
"""The build's check of the tool definitions, checked: each broken definition
below must be refused, by embed.py or by tooldefs-check, with a message that
names the tool (or the file) and the problem; the real definitions must pass.

    test_tooldefs.py EMBED.py TOOLDEFS-CHECK DEFS.json...

Each case copies the real files to a temporary directory, breaks one, and
runs the two steps the build runs (embed.py --json, then tooldefs-check on
its output, the same checks as on the embedded text).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def tool(doc, name):
    return next(t for t in doc["tools"] if t["name"] == name)


def set_in(doc, name, key, value):
    tool(doc, name)[key] = value


def edit_text(old, new):
    """A change of the file's text (what json.load would refuse)."""
    def change(text):
        assert old in text, old
        return text.replace(old, new, 1)
    change.on_text = True
    return change


# (what, file, change of the parsed document or of the text, the step that
# must refuse it, words the message must hold)
CASES = [
    ("not JSON", "diagnostics.json", edit_text('"name": "echo",', '"name": "echo",,'),
     "embed", ["diagnostics.json:", "not valid JSON"]),
    ("a key twice", "diagnostics.json", edit_text('"title": "Echo",', '"title": "Echo", "title": "Echo",'),
     "embed", ["diagnostics.json", 'key "title" appears twice']),
    ("a name used twice", "copy.json", lambda d: set_in(d, "copy_files", "name", "list_containers"),
     "embed", ["tool list_containers", "must be unique"]),
    ("a field missing", "copy.json", lambda d: tool(d, "copy_files").pop("description"),
     "embed", ["tool copy_files", "missing description"]),
    ("a hint misspelt", "status.json",
     lambda d: set_in(d, "system_status", "annotations",
                      {"readOnly": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}),
     "embed", ["tool system_status", "annotations"]),
    ("an output schema that is no object", "diagnostics.json",
     lambda d: set_in(d, "echo", "outputSchema", {"type": "string"}),
     "embed", ["tool echo", '"outputSchema" must be a schema of "type": "object"']),
    ("a definition without a handler", "diagnostics.json", lambda d: set_in(d, "sleep", "name", "nap"),
     "check", ["tool nap: no handler", "tool sleep: a handler in", "but no definition"]),
    ("a handler without a definition", "lifecycle.json",
     lambda d: d.__setitem__("tools", [t for t in d["tools"] if t["name"] != "container_stats"]),
     "check", ["tool container_stats: a handler in", "lifecycle.c", "but no definition"]),
    ("a keyword the validator skips", "diagnostics.json",
     lambda d: tool(d, "echo")["inputSchema"]["properties"]["text"].__setitem__("format", "uri"),
     "check", ["tool echo: inputSchema", "properties.text", 'keyword "format" is not checked']),
    ("a schema the validator refuses", "lifecycle.json",
     lambda d: tool(d, "container_logs")["inputSchema"]["properties"]["tail"].__setitem__("minimum", "0"),
     "check", ["tool container_logs: inputSchema", '"minimum" must be a number']),
    ("required names a field that is not there", "diagnostics.json",
     lambda d: tool(d, "sleep")["outputSchema"].__setitem__("required", ["sleptMs", "canceled"]),
     "check", ["tool sleep: outputSchema", '"canceled", which is not in "properties"']),
    ("a placeholder output schema", "lifecycle.json",
     lambda d: set_in(d, "inspect_container", "outputSchema", {"type": "object"}),
     "check", ["tool inspect_container: outputSchema", 'give "properties"']),
    ("an output schema that requires nothing", "lifecycle.json",
     lambda d: tool(d, "remove_container")["outputSchema"].__setitem__("required", []),
     "check", ["tool remove_container: outputSchema", 'non-empty "required" (the fields every result has']),
    ("an unknown toolset", "diagnostics.json", lambda d: d.__setitem__("toolset", "diagnostic"),
     "check", ["diagnostics.json", 'toolset "diagnostic" is not one of']),
]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def steps(embed, check, paths, tmp):
    """The build's two steps; returns (step that failed or None, its stderr)."""
    out = os.path.join(tmp, "defs.json")
    r = run([sys.executable, embed, "--json", out, *paths])
    if r.returncode != 0:
        return "embed", r.stderr
    r = run([check, os.path.join(tmp, "stamp"), out])
    if r.returncode != 0:
        return "check", r.stderr
    return None, ""


def copy_defs(paths, tmp):
    copies = []
    for p in paths:
        dst = os.path.join(tmp, os.path.basename(p))
        shutil.copyfile(p, dst)
        copies.append(dst)
    return copies


def apply(path, change):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if getattr(change, "on_text", False):
        text = change(text)
    else:
        doc = json.loads(text)
        change(doc)
        text = json.dumps(doc, indent=2)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv):
    embed, check, paths = argv[0], argv[1], argv[2:]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        step, err = steps(embed, check, copy_defs(paths, tmp), tmp)
        if step:
            print(f"FAIL the real definitions are refused by {step}:\n{err}")
            failures += 1
        for what, name, change, want_step, words in CASES:
            with tempfile.TemporaryDirectory() as case:
                copies = copy_defs(paths, case)
                apply(os.path.join(case, name), change)
                step, err = steps(embed, check, copies, case)
                missing = [w for w in words if w not in err]
                if step != want_step or missing:
                    print(f"FAIL {what}: want {want_step} to refuse it naming {words}; "
                          f"got {step or 'no refusal'}: {err.strip()}")
                    failures += 1
                else:
                    print(f"ok   {what}: {err.strip().splitlines()[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

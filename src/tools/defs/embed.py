#!/usr/bin/env python3
"""The tool definitions (src/tools/defs/*.json) into C, checked on the way.

    embed.py OUTPUT.c FILE.json...   check the files and write OUTPUT.c, which
                                     holds them as one JSON text,
                                     cm_tooldefs_json (tools/defs.h)
    embed.py --json OUTPUT FILE.json...
                                     the same checks; OUTPUT gets the JSON
                                     text alone (tests/build/ feeds it to
                                     tooldefs-check)
    embed.py --format FILE.json...   rewrite the files in the house layout

The build runs the first form (src/tools/defs/meson.build); any error fails
the build with the file, the tool and what to change.  What this script checks
is the shape of the files (valid JSON, no duplicate key, the fields a tool
has, unique names); the schemas and the handlers are checked by
tooldefs-check (src/tools/defs_check.c) with the server's own validator and
handler table, so the two cannot disagree with the code.

Python 3 standard library only: it runs at build time, never at run time.
"""
import json
import re
import sys

TOOL_KEYS = ["name", "title", "description", "annotations", "inputSchema", "outputSchema"]
HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
# The MCP spec's advice for tool names (2025-11-25: 1 to 128 of these).
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
WIDTH = 110


class DefError(Exception):
    pass


def no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise DefError(f'key "{key}" appears twice in one object')
        seen[key] = value
    return seen


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise DefError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except DefError as e:
        raise DefError(f"{path}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DefError(f"{path}: cannot read: {e}") from None


def check_tool(path, i, tool, names):
    where = f"{path}: tools[{i}]"
    if not isinstance(tool, dict):
        raise DefError(f"{where}: a tool is an object, got {type(tool).__name__}")
    name = tool.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise DefError(f"{where}: \"name\" must be 1 to 128 of A-Z a-z 0-9 _ . -, got {name!r}")
    where = f"{path}: tool {name}"
    missing = [k for k in TOOL_KEYS if k not in tool]
    extra = [k for k in tool if k not in TOOL_KEYS]
    if missing or extra:
        raise DefError(f"{where}: a tool has exactly the fields {', '.join(TOOL_KEYS)}"
                       + (f"; missing {', '.join(missing)}" if missing else "")
                       + (f"; unknown {', '.join(extra)}" if extra else ""))
    for k in ("title", "description"):
        if not isinstance(tool[k], str) or not tool[k].strip():
            raise DefError(f"{where}: \"{k}\" must be a non-empty string")
    ann = tool["annotations"]
    # All four hints, spelled out: a reviewer sees each one, and a client's
    # default for a missing hint (destructive: true) is not what we mean.
    if not isinstance(ann, dict) or sorted(ann) != sorted(HINTS) or not all(isinstance(v, bool) for v in ann.values()):
        raise DefError(f"{where}: \"annotations\" must hold exactly {', '.join(HINTS)}, each true or false "
                       "(the title is added from \"title\")")
    for k in ("inputSchema", "outputSchema"):
        if not isinstance(tool[k], dict) or tool[k].get("type") != "object":
            raise DefError(f"{where}: \"{k}\" must be a schema of \"type\": \"object\" (MCP requires it)")
    if name in names:
        raise DefError(f"{where}: the name is also used in {names[name]}; tool names must be unique")
    names[name] = path


def check_file(path, doc, names):
    if not isinstance(doc, dict) or sorted(doc) != ["tools", "toolset"]:
        raise DefError(f"{path}: the file is an object with exactly \"toolset\" and \"tools\"")
    if not isinstance(doc["toolset"], str) or not doc["toolset"]:
        raise DefError(f"{path}: \"toolset\" must name a family of CONTAINER_MCP_TOOLSETS")
    if not isinstance(doc["tools"], list) or not doc["tools"]:
        raise DefError(f"{path}: \"tools\" must be a non-empty array")
    for i, tool in enumerate(doc["tools"]):
        check_tool(path, i, tool, names)


def c_literal(text):
    """text as C string literals, one per line.  '?' is escaped too: with
    -std=c17 a '??/' would otherwise be a trigraph."""
    out, line = [], ""
    for ch in text:
        if ch in '"\\?':
            piece = "\\" + ch
        elif 0x20 <= ord(ch) < 0x7F:
            piece = ch
        else:
            piece = "".join(f"\\{b:03o}" for b in ch.encode("utf-8"))
        line += piece
        if len(line) >= 100:
            out.append(f'"{line}"')
            line = ""
    if line or not out:
        out.append(f'"{line}"')
    return "\n        ".join(out)


def combined(paths):
    names, files = {}, []
    for path in paths:
        doc = load(path)
        check_file(path, doc, names)
        files.append({"file": path.rsplit("/", 1)[-1], "toolset": doc["toolset"], "tools": doc["tools"]})
    # One document for all files, in the order given (that is the order of
    # tools/list), parsed once at startup.
    return files, json.dumps(files, separators=(",", ":"), ensure_ascii=False)


def embed(output, paths):
    files, text = combined(paths)
    with open(output, "w", encoding="utf-8") as f:
        f.write("/* Generated by src/tools/defs/embed.py from " + ", ".join(d["file"] for d in files)
                + ": edit those, not this. */\n")
        f.write('#include "tools/defs.h"\n\n')
        f.write("const char cm_tooldefs_json[] =\n        " + c_literal(text) + ";\n")


def layout(value, indent=0):
    """Pretty JSON, with what fits on one line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or indent + len(flat) <= WIDTH and indent >= 8:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {layout(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if not value:
        return "[]"
    items = [pad + layout(v, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def main(argv):
    try:
        if len(argv) >= 2 and argv[0] == "--format":
            for path in argv[1:]:
                doc = load(path)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(layout(doc) + "\n")
            return 0
        if len(argv) >= 3 and argv[0] == "--json":
            with open(argv[1], "w", encoding="utf-8") as f:
                f.write(combined(argv[2:])[1])
            return 0
        if len(argv) < 2:
            print(__doc__, file=sys.stderr)
            return 2
        embed(argv[0], argv[1:])
        return 0
    except DefError as e:
        print(f"tool definitions: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

/* The tool definitions as data.  Each tool's name, title, description,
 * annotations, inputSchema and outputSchema live in src/tools/defs/<family>.json,
 * one file per family with the toolset it belongs to; the build checks them
 * (src/tools/defs/embed.py, then tools/defs_check.c) and embeds them all as
 * one JSON text, parsed once when the server registers its tools. */
#ifndef CM_TOOLS_DEFS_H
#define CM_TOOLS_DEFS_H

#include <jansson.h>

#include "util/err.h"

/* [{"file": "containers.json", "toolset": "containers", "tools": [...]}, ...],
 * in the order meson lists the files.  Generated: tooldefs.c. */
extern const char cm_tooldefs_json[];

/* The parsed definitions, each tool's annotations completed with its title
 * (the listing has always carried it there; the files do not repeat it).
 * NULL with err set if the embedded text does not parse, which the build's
 * check rules out. */
json_t *cm_tooldefs_load(cm_err *err);
/* The same from another text of that form (tooldefs-check, for its tests). */
json_t *cm_tooldefs_parse(const char *text, cm_err *err);

#endif

/* The embedded tool definitions, parsed (tools/defs.h). */
#include "tools/defs.h"

#include <errno.h>

#include "util/json.h"

json_t *cm_tooldefs_load(cm_err *err) { return cm_tooldefs_parse(cm_tooldefs_json, err); }

json_t *cm_tooldefs_parse(const char *text, cm_err *err) {
        json_error_t jerr;
        json_t *defs = json_loads(text, JSON_REJECT_DUPLICATES, &jerr), *file, *def;
        size_t i, j;
        if (!json_is_array(defs)) {
                json_decref(defs);
                (void)cm_err_set(err, EINVAL, "tool definitions: not a JSON array: %s (line %d)", jerr.text, jerr.line);
                return NULL;
        }
        json_array_foreach(defs, i, file) {
                json_array_foreach(json_object_get(file, "tools"), j, def) {
                        json_t *ann = json_object_get(def, "annotations");
                        if (json_is_object(ann))
                                (void)json_object_set(ann, "title", json_object_get(def, "title"));
                }
        }
        return defs;
}

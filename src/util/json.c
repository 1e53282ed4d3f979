#include "util/json.h"

#include "util/cleanup.h"

const char *cm_json_type_name(const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT: return "object";
        case JSON_ARRAY: return "array";
        case JSON_STRING: return "string";
        case JSON_INTEGER: return "integer";
        case JSON_REAL: return "number";
        case JSON_TRUE:
        case JSON_FALSE: return "boolean";
        case JSON_NULL: return "null";
        }
        return "unknown";
}

char *cm_json_dump(const json_t *v) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s)
                s = xstrdup("null");
        return s;
}

const char *cm_json_str(const json_t *obj, const char *key) {
        return json_string_value(json_object_get(obj, key));
}

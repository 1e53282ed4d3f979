/* libFuzzer: arbitrary bytes into cm_parse_when (logs `since`, an agent's
 * value).  Nothing may crash or overflow (UBSan aborts on a signed
 * overflow); what it accepts must be stable, parsed twice the same instant;
 * every refusal must say the three forms it takes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/when.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        cm_err err = CM_ERR_INIT;
        int64_t a, b;

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        if (cm_parse_when(s, 1764421200000, &a, &err) == 0) {
                if (cm_parse_when(s, 1764421200000, &b, &err) != 0 || a != b)
                        abort();
        } else if (!strstr(err.msg, "RFC 3339"))
                abort(); /* every refusal says the three forms */
        free(s);
        return 0;
}

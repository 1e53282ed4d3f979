/* Parsing points in time (see when.h).  By hand, not strptime: it must
 * reject what it does not fully read, and take no locale or time zone from
 * the environment. */
#include "util/when.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define MS_MAX ((int64_t)1 << 52) /* far beyond any date we print */

/* Decimal digits into *ret: exactly n of them, or 1 to 15 when n is 0. */
static bool digits(const char **p, int n, int64_t *ret) {
        int64_t v = 0;
        int i = 0;
        while (isdigit((unsigned char)(*p)[i]) && (n == 0 || i < n) && i < 15)
                v = v * 10 + ((*p)[i++] - '0');
        if (i == 0 || (n > 0 && i != n))
                return false;
        *p += i;
        *ret = v;
        return true;
}

/* ".fff..." as milliseconds; none is 0. */
static bool fraction(const char **p, int64_t *ret_ms) {
        int64_t scale = 100;
        *ret_ms = 0;
        if (**p != '.')
                return true;
        if (!isdigit((unsigned char)(*p)[1]))
                return false;
        for ((*p)++; isdigit((unsigned char)**p); (*p)++, scale /= 10)
                *ret_ms += (**p - '0') * scale;
        return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

static bool rfc3339(const char *p, int64_t *ret_ms) {
        static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        int64_t y, mo, d, h = 0, mi = 0, s = 0, frac = 0, zone = 0;

        if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' || !digits(&p, 2, &d))
                return false;
        if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1])
                return false;
        if (*p == 'T' || *p == 't' || *p == ' ') {
                p++;
                if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' ||
                    !digits(&p, 2, &s) || !fraction(&p, &frac) || h > 23 || mi > 59 || s > 60)
                        return false;
                if (*p == 'Z' || *p == 'z')
                        p++;
                else if (*p == '+' || *p == '-') {
                        int64_t zh, zm;
                        int sign = *p++ == '-' ? -1 : 1;
                        if (!digits(&p, 2, &zh) || *p++ != ':' || !digits(&p, 2, &zm) || zh > 23 || zm > 59)
                                return false;
                        zone = sign * (zh * 60 + zm) * 60;
                }
        }
        if (*p)
                return false;
        *ret_ms = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s) - zone) * 1000 + frac;
        return true;
}

/* "1h30m", "10m", "45s", "500ms": at least one number and unit. */
static bool duration(const char *p, int64_t *ret_ms) {
        int64_t total = 0;
        if (!*p)
                return false;
        while (*p) {
                int64_t n, frac, unit;
                if (!digits(&p, 0, &n) || !fraction(&p, &frac))
                        return false;
                if (strncmp(p, "ms", 2) == 0)
                        unit = 1, p += 2;
                else if (*p == 's')
                        unit = 1000, p++;
                else if (*p == 'm')
                        unit = 60000, p++;
                else if (*p == 'h')
                        unit = 3600000, p++;
                else if (*p == 'd')
                        unit = 86400000, p++;
                else
                        return false;
                if (n > MS_MAX / unit)
                        return false;
                total += n * unit + frac * unit / 1000;
                if (total > MS_MAX)
                        return false;
        }
        *ret_ms = total;
        return true;
}

int cm_parse_when(const char *s, int64_t now_ms, int64_t *ret_ms, cm_err *err) {
        const char *p = s ? s : "";
        int64_t secs, frac, ago;

        if (digits(&p, 0, &secs) && fraction(&p, &frac) && !*p && secs < MS_MAX / 1000) {
                *ret_ms = secs * 1000 + frac;
                return 0;
        }
        if (rfc3339(s ? s : "", ret_ms))
                return 0;
        if (duration(s ? s : "", &ago)) {
                *ret_ms = now_ms - ago;
                return 0;
        }
        return cm_err_set(err, EINVAL,
                          "\"%.40s\" is not a time: give unix seconds (1764421200), RFC 3339 "
                          "(2026-11-29T13:00:00Z) or a duration back from now (10m, 1h30m, 45s)",
                          s ? s : "");
}

/* Finding a hunk's lines in a file, as Codex's seek_sequence does
 * (codex-rs/apply-patch/src/seek_sequence.rs): four passes of decreasing
 * strictness, the first that finds the lines wins: exact, then trailing
 * whitespace ignored, then surrounding whitespace ignored, then with
 * typographic dashes, quotes and spaces read as ASCII.  Each pass compares
 * lines by a hash of their form under that pass (computed once per file)
 * and searches with Knuth-Morris-Pratt, so a search costs time linear in
 * the file, whatever the file and the hunk hold; a hash match is checked
 * byte by byte. */
#include <stdint.h>
#include <stdlib.h>

#include "patch/seek.h"

/* One code point of `l` at *i, read leniently (a byte that is not valid
 * UTF-8 stands for itself, apart from every real code point), then mapped
 * as Codex's normalise() maps it. */
static uint32_t next_norm(cm_patch_line l, size_t *i) {
        const unsigned char *s = (const unsigned char *)l.p;
        uint32_t c = s[*i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (k == 0 || *i + k > l.n) {
                ++*i;
                return 0x110000u + c;
        }
        if (k > 1) {
                uint32_t v = c & (0x7fu >> k);
                for (size_t j = 1; j < k; j++) {
                        if ((s[*i + j] & 0xc0) != 0x80) {
                                ++*i;
                                return 0x110000u + c;
                        }
                        v = v << 6 | (s[*i + j] & 0x3fu);
                }
                c = v;
        }
        *i += k;
        if ((c >= 0x2010 && c <= 0x2015) || c == 0x2212)
                return '-';
        if (c >= 0x2018 && c <= 0x201b)
                return '\'';
        if (c >= 0x201c && c <= 0x201f)
                return '"';
        if (c == 0xa0 || (c >= 0x2002 && c <= 0x200a) || c == 0x202f || c == 0x205f || c == 0x3000)
                return ' ';
        return c;
}

static bool norm_space(uint32_t c) { return c < 0x80 && is_space((unsigned char)c); }

/* The mapped code points of `l` without the whitespace around them,
 * fed one at a time to `fn`. */
typedef struct norm_iter {
        cm_patch_line l;
        size_t i, end; /* byte offsets: [i, end) holds what is kept */
} norm_iter;

static void norm_begin(norm_iter *it, cm_patch_line l) {
        size_t i = 0, last_end = 0, first = l.n;
        while (i < l.n) {
                size_t at = i;
                uint32_t c = next_norm(l, &i);
                if (norm_space(c))
                        continue;
                if (first == l.n)
                        first = at;
                last_end = i;
        }
        *it = (norm_iter){l, first, first == l.n ? l.n : last_end};
}

static bool norm_next(norm_iter *it, uint32_t *ret) {
        if (it->i >= it->end)
                return false;
        *ret = next_norm(it->l, &it->i);
        return true;
}

static bool norm_eq(cm_patch_line a, cm_patch_line b) {
        norm_iter x, y;
        uint32_t c, d;
        bool more_a, more_b;
        norm_begin(&x, a);
        norm_begin(&y, b);
        for (;;) {
                more_a = norm_next(&x, &c);
                more_b = norm_next(&y, &d);
                if (!more_a || !more_b)
                        return more_a == more_b;
                if (c != d)
                        return false;
        }
}

#define FNV_OFFSET 1469598103934665603ull
#define FNV_PRIME 1099511628211ull

static uint64_t hash_bytes(cm_patch_line l) {
        uint64_t h = FNV_OFFSET;
        for (size_t i = 0; i < l.n; i++)
                h = (h ^ (unsigned char)l.p[i]) * FNV_PRIME;
        return h;
}

static uint64_t hash_norm(cm_patch_line l) {
        uint64_t h = FNV_OFFSET;
        norm_iter it;
        uint32_t c;
        norm_begin(&it, l);
        while (norm_next(&it, &c))
                h = (h ^ c) * FNV_PRIME;
        return h;
}

uint64_t cm_seek_hash(cm_seek_pass pass, cm_patch_line l) {
        switch (pass) {
        case CM_SEEK_EXACT: return hash_bytes(l);
        case CM_SEEK_RSTRIP: return hash_bytes(line_rstrip(l));
        case CM_SEEK_TRIM: return hash_bytes(line_trim(l));
        default: return hash_norm(l);
        }
}

bool cm_seek_line_eq(cm_seek_pass pass, cm_patch_line a, cm_patch_line b) {
        switch (pass) {
        case CM_SEEK_EXACT: return line_eq(a, b);
        case CM_SEEK_RSTRIP: return line_eq(line_rstrip(a), line_rstrip(b));
        case CM_SEEK_TRIM: return line_eq(line_trim(a), line_trim(b));
        default: return norm_eq(a, b);
        }
}

void cm_seek_index(cm_seek_file *f, const cm_patch_line *lines, size_t n, uint64_t budget) {
        *f = (cm_seek_file){.lines = lines, .n = n, .budget = budget};
}

const uint64_t *cm_seek_hashes(cm_seek_file *f, cm_seek_pass pass) {
        if (!f->hash[pass]) {
                f->hash[pass] = xmalloc((f->n ? f->n : 1) * sizeof(uint64_t));
                for (size_t i = 0; i < f->n; i++)
                        f->hash[pass][i] = cm_seek_hash(pass, f->lines[i]);
        }
        return f->hash[pass];
}

void cm_seek_free(cm_seek_file *f) {
        for (size_t p = 0; p < CM_SEEK_PASSES; p++)
                free(f->hash[p]);
}

static bool match_at(cm_seek_pass pass, const cm_seek_file *f, const cm_patch_line *pat, size_t m, size_t at) {
        for (size_t k = 0; k < m; k++)
                if (!cm_seek_line_eq(pass, f->lines[at + k], pat[k]))
                        return false;
        return true;
}

/* The first i >= start where the pattern's hashes occur in the file's
 * and the lines really match (KMP over the hashes). */
static bool kmp(cm_seek_pass pass, cm_seek_file *f, const uint64_t *fh, const cm_patch_line *pat, const uint64_t *ph,
                size_t m, size_t start, size_t *ret) {
        cleanup_free size_t *fail = xmalloc(m * sizeof *fail);
        size_t k = 0;
        fail[0] = 0;
        for (size_t i = 1; i < m; i++) {
                while (k && ph[i] != ph[k])
                        k = fail[k - 1];
                k += ph[i] == ph[k];
                fail[i] = k;
        }
        k = 0;
        for (size_t i = start; i < f->n; i++) {
                if (f->budget-- == 0) {
                        f->budget = 0;
                        f->exhausted = true;
                        return false;
                }
                while (k && fh[i] != ph[k])
                        k = fail[k - 1];
                if (fh[i] == ph[k])
                        k++;
                if (k < m)
                        continue;
                if (match_at(pass, f, pat, m, i + 1 - m)) {
                        *ret = i + 1 - m;
                        return true;
                }
                k = fail[k - 1]; /* a hash collision: go on */
        }
        return false;
}

bool cm_seek(cm_seek_file *f, const cm_patch_line *pat, size_t m, size_t start, bool eof, size_t *ret) {
        if (m == 0) {
                *ret = start;
                return true;
        }
        if (m > f->n)
                return false;
        for (cm_seek_pass pass = 0; pass < CM_SEEK_PASSES; pass++) {
                cleanup_free uint64_t *ph = NULL;
                /* At the end of the file only, as Codex's seek_sequence
                 * does for a hunk that ends in "*** End of File". */
                if (eof) {
                        if (match_at(pass, f, pat, m, f->n - m)) {
                                *ret = f->n - m;
                                return true;
                        }
                        continue;
                }
                if (start > f->n - m)
                        return false;
                ph = xmalloc(m * sizeof *ph);
                for (size_t k = 0; k < m; k++)
                        ph[k] = cm_seek_hash(pass, pat[k]);
                if (kmp(pass, f, cm_seek_hashes(f, pass), pat, ph, m, start, ret))
                        return true;
                if (f->exhausted)
                        return false;
        }
        return false;
}

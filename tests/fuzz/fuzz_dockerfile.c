/* libFuzzer: a Dockerfile (the agent's bytes).  Nothing may crash, leak or
 * take long; a parse that succeeds gives what dockerfile.h documents (the
 * argument counts by instruction, lines that only go forward, a FROM
 * before anything but ARG, a short `text`); every argument and flag value
 * then goes through df_word in both quote modes, with some names set; and
 * a failure always says why, starting "Dockerfile". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *lookup(void *arg, const char *name) {
        (void)arg;
        if (!strcmp(name, "a") || !strcmp(name, "HOME"))
                return "/root dir";
        if (!strcmp(name, "e") || !strcmp(name, "1"))
                return "";
        if (!strcmp(name, "q"))
                return "\"'${a}\\";
        return NULL;
}

static void word(const char *raw, char escape) {
        for (int quotes = 0; quotes < 2; quotes++) {
                char *out = NULL;
                cm_err err = CM_ERR_INIT;
                if (df_word(raw, escape, quotes, lookup, NULL, &out, &err) == 0) {
                        if (!out || strlen(out) > DF_MAX_WORD)
                                abort();
                        free(out);
                } else if (!err.msg[0] || out) {
                        abort();
                }
        }
}

static bool counts_ok(const df_inst *in) {
        size_t n = in->n_args;
        switch (in->cmd) {
        case DF_FROM: return !in->json && (n == 1 || n == 2);
        case DF_RUN:
        case DF_SHELL: return in->json ? n >= 1 : (in->cmd == DF_RUN && n == 1);
        case DF_CMD:
        case DF_ENTRYPOINT: return in->json || n == 1;
        case DF_COPY:
        case DF_ADD: return n >= 2;
        case DF_ENV:
        case DF_LABEL: return !in->json && n >= 2 && n % 2 == 0;
        case DF_ARG:
        case DF_EXPOSE: return !in->json && n >= 1;
        case DF_WORKDIR:
        case DF_USER: return !in->json && n == 1;
        }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *)data;
        unsigned lines = 1, last = 0;
        bool from = false;
        df_file f = {0};
        cm_err err = CM_ERR_INIT;

        for (size_t i = 0; i < size; i++)
                lines += text[i] == '\n';
        if (df_parse(text, size, &f, &err) < 0) {
                if (strncmp(err.msg, "Dockerfile", 10) || f.v || f.n)
                        abort();
                return 0;
        }
        if (f.n == 0 || f.n > DF_MAX_INSTRUCTIONS || (f.escape != '\\' && f.escape != '`'))
                abort();
        for (size_t i = 0; i < f.n; i++) {
                const df_inst *in = &f.v[i];
                if (in->line < 1 || in->line <= last || in->line > lines || !counts_ok(in))
                        abort();
                if (!in->args || in->args[in->n_args] || !in->text || strlen(in->text) > 256)
                        abort();
                if (!from && in->cmd != DF_FROM && in->cmd != DF_ARG)
                        abort();
                from = from || in->cmd == DF_FROM;
                last = in->line;
                for (size_t j = 0; j < in->n_args; j++)
                        word(in->args[j], f.escape);
                for (size_t j = 0; j < in->n_flags; j++) {
                        if (!in->flags[j].name)
                                abort();
                        if (in->flags[j].value)
                                word(in->flags[j].value, f.escape);
                }
        }
        if (!from)
                abort();
        df_file_clear(&f);
        return 0;
}

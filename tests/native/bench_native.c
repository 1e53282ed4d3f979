/* Latency of the native runtime through its C API alone: run-to-completion
 * of /bin/true in a fresh sandbox, and exec of /bin/true in a running one.
 * Prints p50/p90/p99 in milliseconds.  A benchmark, not a test: it asserts
 * nothing about the numbers.  Usage: bench_native [iterations [gap-ms]];
 * bench_native mem N: the memory N idle sandboxes cost;
 * bench_native cpu: the CPU share a busy loop gets under cpus=0.5 (CPU
 * time over wall time for 1 s; test_limits checks the quota and the
 * throttling instead, which a loaded machine cannot flip);
 * a gap between calls is what an agent's pace looks like to the kernel
 * (e.g. cgroup v1's grace period on each join is hidden back to back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/native/native.h"
#include "util/cleanup.h"

#define S(x) ((char *)(x))

static double now(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A busy loop's CPU time over wall time under cpus=0.5, about 0.5. */
static int bench_cpu_share(cm_backend *b) {
        char *argv[] = {S("python3"), S("-c"),
                        S("import time\n"
                          "w0, c0 = time.monotonic(), time.process_time()\n"
                          "while time.monotonic() - w0 < 1.0: pass\n"
                          "print((time.process_time() - c0) / (time.monotonic() - w0))\n"),
                        NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 3, .cpus = 0.5, .timeout_ms = 20000};
        cm_exec_result r = {0};
        cm_err err = CM_ERR_INIT;
        if (b->ops->run_wait(b, &spec, NULL, &r, &err) < 0 || r.exit_code != 0) {
                fprintf(stderr, "run_wait: %s %s\n", err.msg, r.err ? r.err : "");
                return 1;
        }
        printf("cpus=0.5: a busy loop got %.2f of a CPU over 1 s (about 0.5 expected)\n", strtod(r.out, NULL));
        cm_exec_result_clear(&r);
        b->ops->free(b);
        return 0;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n) {
        qsort(v, (size_t)n, sizeof *v, cmp);
        printf("%-34s n=%-5d p50=%7.3f ms  p90=%7.3f ms  p99=%7.3f ms  min=%7.3f ms\n", what, n, v[n / 2],
               v[n * 9 / 10], v[n * 99 / 100], v[0]);
}

/* kB of a /proc file's "Key:" line. */
static long kb(const char *path, const char *key) {
        char line[256];
        long v = 0;
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, key, strlen(key)) == 0)
                        v += atol(line + strlen(key));
        if (f)
                (void)fclose(f);
        return v;
}

/* "mem N": N idle sandboxes alive at once; what each costs in memory: the
 * server's own growth, and each init's private pages (it shares the rest
 * with the server, copy-on-write). */
static int bench_memory(cm_backend *b, int n) {
        char **ids = calloc((size_t)n, sizeof *ids);
        cm_run_spec spec = {.image = "host", .memory_bytes = 64 << 20, .pids = 64};
        cm_err err = CM_ERR_INIT;
        long rss0 = kb("/proc/self/status", "VmRSS:"), priv = 0, pss = 0;
        for (int i = 0; i < n; i++)
                if (b->ops->run(b, &spec, &ids[i], &err) < 0) {
                        fprintf(stderr, "run %d: %s\n", i, err.msg);
                        return 1;
                }
        for (int i = 0; i < n; i++) {
                char *json = NULL, path[64];
                const char *p;
                if (b->ops->inspect(b, ids[i], &json, &err) < 0 || !(p = strstr(json, "\"init\":{\"pid\":")))
                        continue;
                (void)snprintf(path, sizeof path, "/proc/%d/smaps_rollup", atoi(p + strlen("\"init\":{\"pid\":")));
                priv += kb(path, "Private_Clean:") + kb(path, "Private_Dirty:");
                pss += kb(path, "Pss:");
                free(json);
        }
        printf("%d idle sandboxes: server RSS +%ld KiB (%.1f KiB each); per init: private %.1f KiB, PSS %.1f KiB\n", n,
               kb("/proc/self/status", "VmRSS:") - rss0, (double)(kb("/proc/self/status", "VmRSS:") - rss0) / n,
               (double)priv / n, (double)pss / n);
        for (int i = 0; i < n; i++) {
                (void)b->ops->remove(b, ids[i], true, &err);
                free(ids[i]);
        }
        free(ids);
        return 0;
}

int main(int argc, char **argv) {
        int n = argc > 1 ? atoi(argv[1]) : 200;
        int gap_ms = argc > 2 ? atoi(argv[2]) : 0;
        struct timespec gap = {gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L};
        char *true_argv[] = {S("/bin/true"), NULL};
        char *sleep_argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {
                .image = "host", .argv = true_argv, .argc = 1, .memory_bytes = 512 << 20, .pids = 256, .cpus = 1};
        cm_exec_spec ex = {.argv = true_argv, .argc = 1};
        cm_backend_status st;
        cm_err err = CM_ERR_INIT;
        double *t = calloc((size_t)n, sizeof *t);
        cm_backend *b = cm_native_open();
        char *id = NULL;

        b->ops->status(b, &st);
        if (!st.available) {
                printf("SKIP: %s\n", st.reason);
                return 77;
        }
        printf("native runtime, %s, %s\n", st.version, st.details);
        if (argc > 2 && strcmp(argv[1], "mem") == 0)
                return bench_memory(b, atoi(argv[2]));
        if (argc > 1 && strcmp(argv[1], "cpu") == 0)
                return bench_cpu_share(b);
        for (int i = 0; i < n + 10; i++) {
                cm_exec_result r;
                double t0;
                if (gap_ms > 0)
                        (void)nanosleep(&gap, NULL);
                t0 = now();
                if (b->ops->run_wait(b, &spec, NULL, &r, &err) < 0 || r.exit_code != 0) {
                        fprintf(stderr, "run_wait: %s\n", err.msg);
                        return 1;
                }
                if (i >= 10)
                        t[i - 10] = now() - t0;
                cm_exec_result_clear(&r);
        }
        report("run_wait /bin/true (C API)", t, n);

        spec.argv = sleep_argv;
        spec.argc = 2;
        if (b->ops->run(b, &spec, &id, &err) < 0) {
                fprintf(stderr, "run: %s\n", err.msg);
                return 1;
        }
        for (int i = 0; i < n + 10; i++) {
                cm_exec_result r;
                double t0;
                if (gap_ms > 0)
                        (void)nanosleep(&gap, NULL);
                t0 = now();
                if (b->ops->exec(b, id, &ex, NULL, &r, &err) < 0 || r.exit_code != 0) {
                        fprintf(stderr, "exec: %s\n", err.msg);
                        return 1;
                }
                if (i >= 10)
                        t[i - 10] = now() - t0;
                cm_exec_result_clear(&r);
        }
        report("exec /bin/true (C API)", t, n);
        (void)b->ops->remove(b, id, true, &err);
        free(id);
        b->ops->free(b);
        free(t);
        return 0;
}

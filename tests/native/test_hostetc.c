/* The host image's /etc holds nothing the host keeps private: no shadow,
 * no tools' configs that carry tokens (npmrc, pip.conf, gitconfig, wgetrc,
 * environment), no root-only file, no *.key.  As root the test gives itself
 * a private mount namespace whose /etc is a copy of the host's with such
 * files planted in it, so the host's own /etc is never written. */
#include "nt.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>

static char fake_etc[] = "/tmp/cm-etc-XXXXXX";

static void put(const char *rel, const char *text, mode_t mode) {
        cleanup_free char *path = xasprintf("%s/%s", fake_etc, rel);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        assert_int_equal(close(fd), 0);
}

static void plant_files(void) {
        put("npmrc", "//registry.npmjs.org/:_authToken=NPM-SECRET\n", 0644);
        put("pip.conf", "[global]\nindex-url = https://user:PIP-SECRET@pypi.example/simple\n", 0644);
        put("gitconfig", "[http]\nextraheader = AUTHORIZATION: bearer GIT-SECRET\n", 0644);
        put("wgetrc", "http_password = WGET-SECRET\n", 0644);
        put("environment", "HTTPS_PROXY=http://u:ENV-SECRET@proxy:3128\n", 0644);
        put("profile.d/cm-public.sh", "PUBLIC=1\n", 0644);
        put("profile.d/cm-rootonly.sh", "export TOKEN=ROOTONLY-SECRET\n", 0600);
        put("profile.d/cm-deploy.key", "KEY-SECRET\n", 0644);
        put("ssl/certs/cm-private-ca.key", "CA-KEY-SECRET\n", 0644);
}

/* Before the backend opens: a private /etc with the planted files. */
static bool plant(void) {
        cleanup_free char *cp = NULL;
        if (geteuid() != 0)
                return false;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                skip_all_because("no private mount namespace: %s", strerror(errno));
        }
        if (!mkdtemp(fake_etc) || mount("tmpfs", fake_etc, "tmpfs", 0, "mode=0755") < 0)
                return false;
        cp = xasprintf("cp -a /etc/. '%s'/", fake_etc);
        if (system(cp) != 0)
                return false;
        plant_files();
        return mount(fake_etc, "/etc", NULL, MS_BIND | MS_REC, NULL) == 0;
}

static void test_no_host_secrets(void **state) {
        cm_exec_result r;
        (void)state;
        nt_sh("cat /etc/npmrc /etc/pip.conf /etc/gitconfig /etc/wgetrc /etc/environment "
              "/etc/profile.d/cm-rootonly.sh /etc/profile.d/cm-deploy.key /etc/ssl/certs/cm-private-ca.key "
              "/etc/shadow 2>/dev/null; "
              "cat /etc/profile.d/cm-public.sh; head -c 5 /etc/passwd; echo; ls /etc/ssl/certs | grep -c pem",
              &r);
        if (strstr(r.out, "SECRET"))
                fail_msg("the sandbox read a host secret: %s", r.out);
        assert_non_null(strstr(r.out, "PUBLIC=1"));   /* the allowlist still works */
        assert_non_null(strstr(r.out, "root:"));      /* passwd is there */
        assert_null(strstr(r.out, "\n0\n"));          /* and the CA certificates */
        cm_exec_result_clear(&r);

        /* A file that turns root-only later leaves the copy too. */
        {
                cleanup_free char *pub = xasprintf("%s/profile.d/cm-public.sh", fake_etc);
                assert_int_equal(chmod(pub, 0600), 0);
                nt_sh("cat /etc/profile.d/cm-public.sh 2>/dev/null || echo GONE", &r);
                assert_non_null(strstr(r.out, "GONE"));
                cm_exec_result_clear(&r);
        }
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_host_secrets),
        };
        int r;
        bool unpriv = argc > 1 && strcmp(argv[1], "--unprivileged") == 0;
        /* The planted /etc needs root; as nobody the host's root-only files
         * are unreadable anyway, so the copy cannot hold them. */
        if (unpriv || geteuid() != 0) {
                skip_all_because("planting files in a private /etc needs root (the unprivileged server cannot "
                                 "read root-only files at all)");
        }
        if (!plant()) {
                skip_all_because("cannot make a private /etc copy");
        }
        /* every run builds its sandbox, so each sees the copy as it is then
         * (a warm sandbox is made before the chmod below) */
        (void)setenv("CONTAINER_MCP_NATIVE_WARM", "0", 1);
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}

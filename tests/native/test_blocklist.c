/* Calls of Docker's blocklist that nothing but the seccomp filter refuses:
 * without it, a sandbox process may trace itself or read its own memory
 * through another process's eyes (same uid, no capability needed), the
 * first step of most ptrace-based escapes and of reading a neighbour's
 * memory.  The answer is EPERM, as Docker's profile gives.  (Calls that
 * dropped capabilities refuse anyway, such as mount, are not here: a
 * missing seccomp rule would not show.) */
#include "nt.h"

static void test_ptrace_and_process_vm_refused(void **state) {
        cm_exec_result r;
        nt_py("import ctypes, os\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "def say(name, rc):\n"
              "    print(name, 'ok' if rc >= 0 else os.strerror(ctypes.get_errno()))\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    # PTRACE_TRACEME: let the parent trace us\n"
              "    os._exit(0 if libc.ptrace(0, 0, None, None) == 0 else ctypes.get_errno())\n"
              "_, st = os.waitpid(pid, 0)\n"
              "code = os.waitstatus_to_exitcode(st)\n"
              "print('traceme', 'ok' if code == 0 else os.strerror(code))\n"
              "class iovec(ctypes.Structure):\n"
              "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
              "src = ctypes.create_string_buffer(b'secret', 16)\n"
              "dst = ctypes.create_string_buffer(16)\n"
              "local = iovec(ctypes.cast(dst, ctypes.c_void_p), 16)\n"
              "remote = iovec(ctypes.cast(src, ctypes.c_void_p), 16)\n"
              "libc.process_vm_readv.restype = ctypes.c_ssize_t\n"
              "say('process_vm_readv', libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1,\n"
              "                                              ctypes.byref(remote), 1, 0))\n",
              NULL, &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "traceme Operation not permitted\n"
                                   "process_vm_readv Operation not permitted\n");
        cm_exec_result_clear(&r);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ptrace_and_process_vm_refused),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}

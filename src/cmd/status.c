/* `container-mcp status`: the system_status document, without a client. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "tools/tools.h"
#include "util/json.h"
#include "util/log.h"

int cmd_status(int argc, char **argv) {
        cm_config cfg;
        cm_app app = {0};
        cm_err err = CM_ERR_INIT;
        int ret = 1;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        printf("Usage: container-mcp status\n\n"
                               "Print, as JSON, which container backends this machine can use (with the reason\n"
                               "and the fix for those it cannot), the active policy from CONTAINER_MCP_*\n"
                               "settings, and the server version: what the system_status tool returns.\n");
                        return 0;
                }
                return cmd_usage_error("status", "unknown argument \"%s\"", argv[i]);
        }
        if (cm_config_load(&cfg, NULL, &err) < 0 || cm_app_open(&app, &cfg, &err) < 0) {
                log_error("%s", err.msg);
        } else {
                cleanup_json json_t *st = cm_status_json(&app, NULL);
                if (json_dumpf(st, stdout, JSON_INDENT(2)) == 0 && putchar('\n') != EOF)
                        ret = 0;
        }
        cm_app_close(&app);
        cm_config_free(&cfg);
        return ret;
}

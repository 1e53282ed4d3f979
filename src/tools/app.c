/* The application context the tools share: configuration and backends. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "tools/keylock.h"
#include "tools/tools.h"
#include "tools/workbench.h"
#include "util/cleanup.h"

static size_t registry_size(void) {
        size_t n = 0;
        while (cm_backends[n])
                n++;
        return n;
}

int cm_app_open(cm_app *app, cm_config *cfg, cm_err *err) {
        memset(app, 0, sizeof *app);
        app->cfg = cfg;
        app->n_backends = registry_size();
        app->backends = xcalloc(app->n_backends, sizeof *app->backends);
        (void)pthread_mutex_init(&app->run_lock, NULL);
        app->workbenches = cm_workbenches_new(app);
        app->patch_locks = cm_keylocks_new();
        if (getrandom(app->owner_key, sizeof app->owner_key, 0) != (ssize_t)sizeof app->owner_key)
                return cm_err_sys(err, errno, "cannot draw the key of the session owner label from getrandom");
        if (cfg->backend && !cm_backend_find(cfg->backend))
                return cm_err_set(err, EINVAL, "unknown backend \"%s\"; choose native, docker or apple", cfg->backend);
        for (size_t i = 0; i < app->n_backends; i++) {
                cm_backend_status st;
                app->backends[i] = cm_backends[i]->open();
                if (app->active)
                        continue;
                if (cfg->backend && strcmp(cfg->backend, cm_backends[i]->name) != 0)
                        continue;
                if (!cfg->backend && cm_backends[i]->only_when_chosen)
                        continue;
                app->backends[i]->ops->status(app->backends[i], &st);
                /* A chosen backend is used even when unavailable: its tools then
                 * say why, which beats silently using another engine. */
                if (st.available || cfg->backend)
                        app->active = app->backends[i];
        }
        return 0;
}

void cm_app_close(cm_app *app) {
        /* Before the backends go: it removes the sandboxes still there. */
        cm_workbenches_free(app->workbenches);
        for (size_t i = 0; i < app->n_backends; i++)
                if (app->backends[i])
                        app->backends[i]->ops->free(app->backends[i]);
        free(app->backends);
        cm_keylocks_free(app->patch_locks);
        (void)pthread_mutex_destroy(&app->run_lock);
        memset(app, 0, sizeof *app);
}

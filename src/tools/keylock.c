/* A mutex per key: a list of the keys in use under one short-held mutex,
 * each with its own mutex and the count of threads holding or waiting for
 * it (the entry goes with the last of them).  Lock order: an entry's
 * mutex is taken with the list's released. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tools/keylock.h"
#include "util/cleanup.h"

struct cm_keylock {
        char *key;
        pthread_mutex_t mu;
        unsigned users; /* holding or waiting */
        struct cm_keylock *next;
};

struct cm_keylocks {
        pthread_mutex_t mu;
        cm_keylock *head;
};

cm_keylocks *cm_keylocks_new(void) {
        cm_keylocks *s = xcalloc(1, sizeof *s);
        (void)pthread_mutex_init(&s->mu, NULL);
        return s;
}

void cm_keylocks_free(cm_keylocks *s) {
        if (!s)
                return;
        (void)pthread_mutex_destroy(&s->mu);
        free(s);
}

cm_keylock *cm_keylock_acquire(cm_keylocks *s, const char *key) {
        cm_keylock *l;
        (void)pthread_mutex_lock(&s->mu);
        for (l = s->head; l && strcmp(l->key, key) != 0; l = l->next)
                ;
        if (!l) {
                l = xcalloc(1, sizeof *l);
                l->key = xstrdup(key);
                (void)pthread_mutex_init(&l->mu, NULL);
                l->next = s->head;
                s->head = l;
        }
        l->users++;
        (void)pthread_mutex_unlock(&s->mu);
        (void)pthread_mutex_lock(&l->mu);
        return l;
}

void cm_keylock_release(cm_keylocks *s, cm_keylock *l) {
        cm_keylock **pp;
        (void)pthread_mutex_unlock(&l->mu);
        (void)pthread_mutex_lock(&s->mu);
        if (--l->users == 0) {
                for (pp = &s->head; *pp != l; pp = &(*pp)->next)
                        ;
                *pp = l->next;
                (void)pthread_mutex_destroy(&l->mu);
                free(l->key);
                free(l);
        }
        (void)pthread_mutex_unlock(&s->mu);
}

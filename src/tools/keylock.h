/* A mutex per key (a container's id), made on first use and freed when
 * nobody holds or waits for it: dpatch serialises the patches to one
 * container without holding up those to others. */
#ifndef CM_TOOLS_KEYLOCK_H
#define CM_TOOLS_KEYLOCK_H

typedef struct cm_keylocks cm_keylocks;
typedef struct cm_keylock cm_keylock;

cm_keylocks *cm_keylocks_new(void);
/* Every lock must have been released. */
void cm_keylocks_free(cm_keylocks *s);

/* Block until this thread holds the lock of `key`. */
cm_keylock *cm_keylock_acquire(cm_keylocks *s, const char *key);
void cm_keylock_release(cm_keylocks *s, cm_keylock *l);

#endif

/* Open-addressing hash map from non-zero uint64 keys to uint64 values.
 * Linear probing with backward-shift deletion, so there are no tombstones
 * and lookups stay short. Not thread-safe: one owner thread. */
#ifndef PHX_MAP_H
#define PHX_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_map {
    uint64_t *keys, *vals;
    size_t cap, len;            /* cap is 0 or a power of two */
} phx_map_t;

static inline void phx_map_init(phx_map_t *m) { m->keys = m->vals = NULL; m->cap = m->len = 0; }
void phx_map_free(phx_map_t *m);
/* Pointer to the value slot for key, or NULL. Valid until the next insert/delete. */
uint64_t *phx_map_get(const phx_map_t *m, uint64_t key);
/* Slot for key, inserted with value 0 if absent; NULL on allocation failure. */
uint64_t *phx_map_put(phx_map_t *m, uint64_t key);
/* Removes key; returns 1 if it was present. */
int phx_map_del(phx_map_t *m, uint64_t key);

#endif

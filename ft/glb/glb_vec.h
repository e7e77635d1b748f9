/* A growable array of fixed-size items: the storage most task bags need
 * (apps/uts: a stack of nodes; apps/bc: source ranges). Aborts on out of
 * memory, like the bags built on it. Not thread safe: one owner. */
#ifndef PHX_GLB_VEC_H
#define PHX_GLB_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

typedef struct phx_glb_vec {
    uint8_t *v;
    size_t n, cap, isz;         /* items, capacity, item size in bytes */
} phx_glb_vec_t;

/* NULL on out of memory. */
phx_glb_vec_t *phx_glb_vec_new(size_t isz);
void phx_glb_vec_free(phx_glb_vec_t *a);
/* Appends a copy of *item. */
void phx_glb_vec_push(phx_glb_vec_t *a, const void *item);
static inline void *phx_glb_vec_at(const phx_glb_vec_t *a, size_t i) { return a->v + i * a->isz; }
/* Moves the first k items into a new vector (NULL if k is 0 or no memory). */
phx_glb_vec_t *phx_glb_vec_take_front(phx_glb_vec_t *a, size_t k);
/* Appends every item of b, then frees b. */
void phx_glb_vec_merge(phx_glb_vec_t *a, phx_glb_vec_t *b);
/* Count (u32), then each item through enc. */
void phx_glb_vec_pack(const phx_glb_vec_t *a, phx_wenc_t *e, void (*enc)(const void *item, phx_wenc_t *e));
/* The inverse; wire_size bounds the count by the bytes left; dec returns 0
 * or a negative code for an invalid item. NULL on bad input. */
phx_glb_vec_t *phx_glb_vec_unpack(phx_wdec_t *d, size_t isz, size_t wire_size,
                                  int (*dec)(void *item, phx_wdec_t *d));

#endif

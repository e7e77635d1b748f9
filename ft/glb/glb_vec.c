#include "ft/glb/glb_vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

phx_glb_vec_t *phx_glb_vec_new(size_t isz)
{
    phx_glb_vec_t *a = calloc(1, sizeof *a);
    if (a)
        a->isz = isz;
    return a;
}

void phx_glb_vec_free(phx_glb_vec_t *a)
{
    if (a)
        free(a->v);
    free(a);
}

void phx_glb_vec_push(phx_glb_vec_t *a, const void *item)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        uint8_t *v = realloc(a->v, cap * a->isz);
        if (!v) {
            fprintf(stderr, "glb: out of memory growing a bag to %zu items\n", cap);
            abort();
        }
        a->v = v, a->cap = cap;
    }
    memcpy(a->v + a->n++ * a->isz, item, a->isz);
}

phx_glb_vec_t *phx_glb_vec_take_front(phx_glb_vec_t *a, size_t k)
{
    if (k == 0 || k > a->n)
        return NULL;
    phx_glb_vec_t *l = phx_glb_vec_new(a->isz);
    if (!l)
        return NULL;
    for (size_t i = 0; i < k; i++)
        phx_glb_vec_push(l, phx_glb_vec_at(a, i));
    memmove(a->v, a->v + k * a->isz, (a->n - k) * a->isz);
    a->n -= k;
    return l;
}

void phx_glb_vec_merge(phx_glb_vec_t *a, phx_glb_vec_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        phx_glb_vec_push(a, phx_glb_vec_at(b, i));
    phx_glb_vec_free(b);
}

void phx_glb_vec_pack(const phx_glb_vec_t *a, phx_wenc_t *e, void (*enc)(const void *item, phx_wenc_t *e))
{
    phx_wenc_u32(e, (uint32_t)a->n);
    for (size_t i = 0; i < a->n; i++)
        enc(phx_glb_vec_at(a, i), e);
}

phx_glb_vec_t *phx_glb_vec_unpack(phx_wdec_t *d, size_t isz, size_t wire_size,
                                  int (*dec)(void *item, phx_wdec_t *d))
{
    uint32_t n = phx_wdec_u32(d);
    if (d->err || (wire_size && n > phx_wdec_left(d) / wire_size))
        return NULL;
    phx_glb_vec_t *a = phx_glb_vec_new(isz);
    uint8_t item[256];
    if (!a || isz > sizeof item) {
        phx_glb_vec_free(a);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (dec(item, d) != 0 || d->err) {
            phx_glb_vec_free(a);
            return NULL;
        }
        phx_glb_vec_push(a, item);
    }
    return a;
}

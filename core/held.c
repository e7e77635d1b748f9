#include "core/held.h"

#include <stdlib.h>

#include "base/phx_err.h"

static inline uint32_t slot_of(uint64_t src, uint64_t ssn, uint32_t cap)
{
    uint64_t k = src * 0x9e3779b97f4a7c15ULL ^ ssn;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k & (cap - 1);
}

static inline uint32_t slot_msg(const phx_msg_t *m, uint32_t cap) { return slot_of(m->hdr.src, m->hdr.ssn, cap); }

void phx_held_free(phx_held_t *h)
{
    for (uint32_t i = 0; i < h->cap; i++)
        phx_msg_free(h->slot[i]);
    free(h->slot);
    phx_held_init(h);
}

static int grow(phx_held_t *h)
{
    uint32_t cap = h->cap ? h->cap * 2 : 8;
    if (!cap)
        return PHX_ENOMEM;
    phx_msg_t **s = calloc(cap, sizeof *s);
    if (!s)
        return PHX_ENOMEM;
    for (uint32_t i = 0; i < h->cap; i++) {
        if (!h->slot[i])
            continue;
        uint32_t j = slot_msg(h->slot[i], cap);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = h->slot[i];
    }
    free(h->slot);
    h->slot = s;
    h->cap = cap;
    return 0;
}

/* Slot of <src, ssn>, or of the empty slot that ends its probe run. */
static uint32_t find(const phx_held_t *h, uint64_t src, uint64_t ssn)
{
    uint32_t i = slot_of(src, ssn, h->cap);
    while (h->slot[i] && (h->slot[i]->hdr.src != src || h->slot[i]->hdr.ssn != ssn))
        i = (i + 1) & (h->cap - 1);
    return i;
}

int phx_held_put(phx_held_t *h, phx_msg_t *m)
{
    if ((h->len + 1) * 4 > (uint64_t)h->cap * 3) {
        int rc = grow(h);
        if (rc)
            return rc;
    }
    uint32_t i = find(h, m->hdr.src, m->hdr.ssn);
    if (h->slot[i])
        return PHX_EEXIST;
    h->slot[i] = m;
    h->len++;
    return 0;
}

phx_msg_t *phx_held_take(phx_held_t *h, uint64_t src, uint64_t ssn)
{
    if (!h->len)
        return NULL;
    uint32_t mask = h->cap - 1, i = find(h, src, ssn);
    phx_msg_t *m = h->slot[i];
    if (!m)
        return NULL;
    /* Backward shift: pull later entries of the probe run into the hole. */
    for (uint32_t j = (i + 1) & mask; h->slot[j]; j = (j + 1) & mask) {
        uint32_t home = slot_msg(h->slot[j], h->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            h->slot[i] = h->slot[j];
            i = j;
        }
    }
    h->slot[i] = NULL;
    h->len--;
    return m;
}

phx_msg_t *phx_held_next(const phx_held_t *h, size_t *i)
{
    while (*i < h->cap)
        if (h->slot[(*i)++])
            return h->slot[*i - 1];
    return NULL;
}

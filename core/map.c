#include "map.h"

#include <stdlib.h>

static inline size_t slot(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

void phx_map_free(phx_map_t *m)
{
    free(m->keys);
    free(m->vals);
    phx_map_init(m);
}

uint64_t *phx_map_get(const phx_map_t *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
        if (!m->keys[i])
            return NULL;
    }
}

static int grow(phx_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 8;
    uint64_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = slot(m->keys[i], cap);
        while (k[j])
            j = (j + 1) & (cap - 1);
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = cap;
    return 0;
}

uint64_t *phx_map_put(phx_map_t *m, uint64_t key)
{
    uint64_t *v = phx_map_get(m, key);
    if (v)
        return v;
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
        return NULL;
    size_t i = slot(key, m->cap);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->vals[i] = 0;
    m->len++;
    return &m->vals[i];
}

int phx_map_del(phx_map_t *m, uint64_t key)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1, i = slot(key, m->cap);
    while (m->keys[i] != key) {
        if (!m->keys[i])
            return 0;
        i = (i + 1) & mask;
    }
    /* Backward shift: pull later entries of the probe run into the hole. */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->len--;
    return 1;
}

/* mlog-pessimistic's held frames: see hold.h. Two rings: the tokens, in
 * order (grown by doubling), and the groups, each a count of tokens and a
 * snapshot. */
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/mlog/hold.h"

struct phx_ml_hold {
    int nq;
    void **tok;                 /* ring of cap tokens */
    size_t cap, first, len;
    size_t gn[PHX_ML_HOLD_GROUPS];     /* tokens per group */
    uint8_t gopen[PHX_ML_HOLD_GROUPS]; /* the group's snapshot was found stored */
    uint64_t *gsnap;            /* PHX_ML_HOLD_GROUPS x nq */
    int gfirst, glen;
    int batch;                  /* the newest group is this batch's */
};

phx_ml_hold_t *phx_ml_hold_create(int nq)
{
    if (nq < 1)
        return NULL;
    phx_ml_hold_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->nq = nq;
    h->gsnap = calloc((size_t)PHX_ML_HOLD_GROUPS * (size_t)nq, sizeof *h->gsnap);
    if (!h->gsnap) {
        free(h);
        return NULL;
    }
    return h;
}

void phx_ml_hold_destroy(phx_ml_hold_t *h)
{
    if (!h)
        return;
    free(h->tok);
    free(h->gsnap);
    free(h);
}

static int grow(phx_ml_hold_t *h)
{
    size_t cap = h->cap ? 2 * h->cap : 256;
    void **t = malloc(cap * sizeof *t);
    if (!t)
        return PHX_ENOMEM;
    for (size_t i = 0; i < h->len; i++)
        t[i] = h->tok[(h->first + i) % h->cap];
    free(h->tok);
    h->tok = t;
    h->cap = cap;
    h->first = 0;
    return 0;
}

static int newest(const phx_ml_hold_t *h)
{
    return (h->gfirst + h->glen - 1) % PHX_ML_HOLD_GROUPS;
}

int phx_ml_hold_put(phx_ml_hold_t *h, void *tok, const uint64_t *snap)
{
    if (!snap && !h->len)
        return PHX_EINVAL;
    if (h->len == h->cap && grow(h))
        return PHX_ENOMEM;
    if (snap && !h->batch) {
        if (h->glen < PHX_ML_HOLD_GROUPS) {
            int g = (h->gfirst + h->glen++) % PHX_ML_HOLD_GROUPS;
            h->gn[g] = 0;
        }
        /* A new group, or (all slots in use) the newest one, which then
         * waits for this later snapshot too. */
        int g = newest(h);
        h->gopen[g] = 0;
        memcpy(h->gsnap + (size_t)g * (size_t)h->nq, snap, (size_t)h->nq * sizeof *snap);
        h->batch = 1;
    }
    h->gn[newest(h)]++;
    h->tok[(h->first + h->len++) % h->cap] = tok;
    return 0;
}

void phx_ml_hold_batch_end(phx_ml_hold_t *h)
{
    h->batch = 0;
}

size_t phx_ml_hold_len(const phx_ml_hold_t *h)
{
    return h->len;
}

static void *take(phx_ml_hold_t *h)
{
    void *t = h->tok[h->first];
    h->first = (h->first + 1) % h->cap;
    h->len--;
    if (!--h->gn[h->gfirst]) {
        h->gfirst = (h->gfirst + 1) % PHX_ML_HOLD_GROUPS;
        if (!--h->glen)
            h->batch = 0;   /* the batch's group left: its next frame opens one */
    }
    return t;
}

void *phx_ml_hold_next(phx_ml_hold_t *h, int (*stored)(void *arg, const uint64_t *snap), void *arg)
{
    if (!h->len)
        return NULL;
    int g = h->gfirst;
    if (!h->gopen[g]) {
        if (!stored(arg, h->gsnap + (size_t)g * (size_t)h->nq))
            return NULL;
        h->gopen[g] = 1;
    }
    return take(h);
}

void *phx_ml_hold_pop(phx_ml_hold_t *h)
{
    return h->len ? take(h) : NULL;
}

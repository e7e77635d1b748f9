#include "ft/ckpt/ckpt.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

int phx_ck_buddy(int n, const int *ring, const uint8_t *dead, int r)
{
    int pos = -1;
    for (int i = 0; i < n; i++)
        if (ring[i] == r)
            pos = i;
    if (pos < 0)
        return -1;
    for (int k = 1; k < n; k++) {
        int b = ring[(pos + k) % n];
        if (!dead[b])
            return b;
    }
    return -1;
}

int phx_ck_relocate(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead, int *loc,
                    int *lost, int *lost_buddy)
{
    return phx_ck_relocate_p(n, nloc, loc_e, buddy_e, dead, 0, loc, lost, lost_buddy);
}

int phx_ck_relocate_p(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead, int helpers,
                      int *loc, int *lost, int *lost_buddy)
{
    int *live = malloc((size_t)n * sizeof *live), *pos = malloc((size_t)n * sizeof *pos);
    int *kx = calloc((size_t)n, sizeof *kx);
    if (!live || !pos || !kx) {
        free(live);
        free(pos);
        free(kx);
        return PHX_ENOMEM;
    }
    int nlive = 0, rc = 0, k = 0;
    for (int r = 0; r < n; r++) {
        pos[r] = nlive;
        if (!dead[r])
            live[nlive++] = r;
    }
    int p = helpers < nlive ? helpers : nlive;
    for (int i = 0; i < nloc && !rc; i++) {
        int x = loc_e[i];
        if (x < 0 || x >= n) {
            rc = PHX_EINVAL;
            break;
        }
        if (!dead[x]) {
            loc[i] = x;
            continue;
        }
        int b = buddy_e[x];
        if (b < 0 || b >= n || dead[b]) {
            *lost = x;
            *lost_buddy = b;
            rc = PHX_EUNRECOVERABLE;
            break;
        }
        /* The k-th moved slice goes to the k-th live rank from the buddy on:
         * the lost load spreads evenly, and a single slice stays local to the
         * copy. With helpers, each dead rank counts on its own, so its set of
         * hosts is fixed by its buddy alone. */
        if (p > 0)
            loc[i] = live[(pos[b] + kx[x]++ % p) % nlive];
        else
            loc[i] = live[(pos[b] + k++) % nlive];
    }
    free(live);
    free(pos);
    free(kx);
    return rc;
}

/* ---- commit ---------------------------------------------------------------- */

int phx_ck_commit_init(phx_ck_commit_t *c, int n)
{
    c->n = n;
    c->epoch = 0;
    c->ready = calloc((size_t)n, 1);
    return c->ready ? 0 : PHX_ENOMEM;
}

void phx_ck_commit_free(phx_ck_commit_t *c) { free(c->ready); c->ready = NULL; }

void phx_ck_commit_begin(phx_ck_commit_t *c, uint64_t e)
{
    c->epoch = e;
    memset(c->ready, 0, (size_t)c->n);
}

int phx_ck_commit_check(phx_ck_commit_t *c, const uint8_t *dead)
{
    if (!c->epoch)
        return 0;
    for (int r = 0; r < c->n; r++)
        if (!dead[r] && !c->ready[r])
            return 0;
    c->epoch = 0;   /* decided once */
    return 1;
}

int phx_ck_commit_ready(phx_ck_commit_t *c, int from, uint64_t e, const uint8_t *dead)
{
    if (!c->epoch || e != c->epoch || from < 0 || from >= c->n)
        return 0;
    c->ready[from] = 1;
    return phx_ck_commit_check(c, dead);
}

void phx_ck_commit_abort(phx_ck_commit_t *c) { c->epoch = 0; }

/* ---- recovery round -------------------------------------------------------- */

int phx_ck_round_init(phx_ck_round_t *r, int n)
{
    r->n = n;
    r->seen = calloc((size_t)n, 1);
    r->set = calloc((size_t)n * (size_t)n, 1);
    r->epoch = calloc((size_t)n, sizeof *r->epoch);
    return r->seen && r->set && r->epoch ? 0 : PHX_ENOMEM;
}

void phx_ck_round_free(phx_ck_round_t *r)
{
    free(r->seen);
    free(r->set);
    free(r->epoch);
}

void phx_ck_round_report(phx_ck_round_t *r, int from, const uint8_t *dead, uint64_t committed)
{
    if (from < 0 || from >= r->n)
        return;
    r->seen[from] = 1;
    memcpy(r->set + (size_t)from * (size_t)r->n, dead, (size_t)r->n);
    r->epoch[from] = committed;
}

int phx_ck_round_decide(const phx_ck_round_t *r, const uint8_t *dead, uint64_t *epoch)
{
    uint64_t e = 0;
    for (int x = 0; x < r->n; x++) {
        if (dead[x])
            continue;
        if (!r->seen[x] || memcmp(r->set + (size_t)x * (size_t)r->n, dead, (size_t)r->n))
            return 0;
        if (r->epoch[x] > e)
            e = r->epoch[x];
    }
    *epoch = e;
    return 1;
}

/* ---- filter ---------------------------------------------------------------- */

int phx_ck_filter_init(phx_ck_filter_t *f, int n)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->rb_mark = calloc((size_t)n, sizeof *f->rb_mark);
    f->ck_mark = calloc((size_t)n, sizeof *f->ck_mark);
    return f->rb_mark && f->ck_mark ? 0 : PHX_ENOMEM;
}

void phx_ck_filter_free(phx_ck_filter_t *f)
{
    free(f->rb_mark);
    free(f->ck_mark);
}

int phx_ck_filter_drop(phx_ck_filter_t *f, int peer)
{
    if (peer < 0 || peer >= f->n || f->rb_mark[peer] >= f->round)
        return 0;
    f->dropped++;
    return 1;
}

int phx_ck_filter_marked(const phx_ck_filter_t *f, int self, uint64_t e, const uint8_t *dead)
{
    for (int p = 0; p < f->n; p++)
        if (p != self && !dead[p] && f->ck_mark[p] < e)
            return 0;
    return 1;
}

/* ---- store ----------------------------------------------------------------- */

/* Keeps buf for reuse: a checkpoint's buffers are about the previous
 * one's size, and fresh large allocations cost a page fault per page. */
static void pool_put(phx_ck_store_t *s, void *buf)
{
    if (!buf || (s->keep && s->keep(s->keep_ctx, buf)))
        return;
    size_t cap = malloc_usable_size(buf);   /* what it was allocated for, not the blob's length */
    int k = 0;
    for (int i = 0; i < PHX_CK_POOL; i++) {
        if (!s->pool[i]) {
            k = i;
            break;
        }
        if (s->pool_cap[i] < s->pool_cap[k])
            k = i;
    }
    if (s->pool[k] && s->pool_cap[k] >= cap) {
        free(buf);   /* the pool keeps the larger ones */
        return;
    }
    free(s->pool[k]);
    s->pool[k] = buf;
    s->pool_cap[k] = cap;
}

void *phx_ck_store_buf(phx_ck_store_t *s, size_t need, size_t *cap)
{
    int k = -1;
    for (int i = 0; i < PHX_CK_POOL; i++)
        if (s->pool[i] && s->pool_cap[i] >= need && (k < 0 || s->pool_cap[i] < s->pool_cap[k]))
            k = i;
    if (k < 0) {
        *cap = need;
        return malloc(need ? need : 1);
    }
    void *b = s->pool[k];
    *cap = s->pool_cap[k];
    s->pool[k] = NULL;
    return b;
}

static void copy_clear(phx_ck_store_t *s, phx_ck_copy_t *c)
{
    pool_put(s, c->own);
    c->own = NULL;
    c->own_len = 0;
    for (int r = 0; r < s->n; r++) {
        pool_put(s, c->held[r]);
        c->held[r] = NULL;
        c->held_len[r] = 0;
    }
    c->epoch = 0;
}

int phx_ck_store_init(phx_ck_store_t *s, int n, int nloc)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    for (int i = 0; i < 2; i++) {
        phx_ck_copy_t *c = &s->slot[i];
        c->held = calloc((size_t)n, sizeof *c->held);
        c->held_len = calloc((size_t)n, sizeof *c->held_len);
        c->loc = calloc((size_t)nloc, sizeof *c->loc);
        c->buddy = calloc((size_t)n, sizeof *c->buddy);
        if (!c->held || !c->held_len || !c->loc || !c->buddy)
            return PHX_ENOMEM;
    }
    return 0;
}

void phx_ck_store_free(phx_ck_store_t *s)
{
    for (int i = 0; i < 2; i++) {
        phx_ck_copy_t *c = &s->slot[i];
        if (c->held)
            copy_clear(s, c);
        free(c->held);
        free(c->held_len);
        free(c->loc);
        free(c->buddy);
    }
    for (int i = 0; i < PHX_CK_POOL; i++)
        free(s->pool[i]);
}

phx_ck_copy_t *phx_ck_store_open(phx_ck_store_t *s, uint64_t e)
{
    phx_ck_copy_t *c = &s->slot[e & 1];
    if (c->epoch == e)
        return c;
    if (c->epoch && c->epoch == s->committed)
        return NULL;
    copy_clear(s, c);
    c->epoch = e;
    return c;
}

phx_ck_copy_t *phx_ck_store_get(phx_ck_store_t *s, uint64_t e)
{
    phx_ck_copy_t *c = &s->slot[e & 1];
    return e && c->epoch == e ? c : NULL;
}

int phx_ck_store_put_own(phx_ck_store_t *s, uint64_t e, void *blob, size_t len)
{
    phx_ck_copy_t *c = phx_ck_store_open(s, e);
    if (!c)
        return PHX_ENOENT;
    pool_put(s, c->own);
    c->own = blob;
    c->own_len = len;
    return 0;
}

int phx_ck_store_put_held(phx_ck_store_t *s, uint64_t e, int rank, void *blob, size_t len)
{
    phx_ck_copy_t *c = phx_ck_store_open(s, e);
    if (!c || rank < 0 || rank >= s->n)
        return PHX_ENOENT;
    pool_put(s, c->held[rank]);
    c->held[rank] = blob;
    c->held_len[rank] = len;
    return 0;
}

void phx_ck_store_commit(phx_ck_store_t *s, uint64_t e)
{
    if (e > s->committed)
        s->committed = e;
}

int phx_ck_dead_since(int n, int nloc, const int *loc_e, const uint8_t *dead, uint8_t *since)
{
    int k = 0;
    for (int r = 0; r < n; r++) {
        since[r] = 0;
        for (int i = 0; loc_e && dead[r] && i < nloc && !since[r]; i++)
            since[r] = loc_e[i] == r;
        k += since[r];
    }
    return k;
}

int phx_ck_home_table(int n, int nloc, int slices, const int *loc, const uint8_t *dead, int *t)
{
    int moves = 0;
    for (int i = 0; i < nloc; i++) {
        int h = i / slices;
        t[i] = loc[i];
        if (h < n && !dead[h] && t[i] != h) {
            t[i] = h;
            moves = 1;
        }
    }
    return moves;
}

int phx_ck_act_reserve(void **a, int len, int *cap, size_t size)
{
    if (len < *cap)
        return 0;
    int c = *cap ? 2 * *cap : 8;
    void *p = realloc(*a, (size_t)c * size);
    if (!p)
        return PHX_ENOMEM;
    *a = p;
    *cap = c;
    return 0;
}

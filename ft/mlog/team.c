/* Team-based message logging, the pure parts: see team.h. */
#include "ft/mlog/team.h"

#include <stdlib.h>

#include "base/phx_err.h"

struct phx_team_pair {
    uint64_t src, dst, ssn;
};

int phx_team_rollback_set(int n, int t, const uint8_t *dead, uint8_t *rb)
{
    if (n < 1 || t < 1)
        return PHX_EINVAL;
    int x = -1, nd = 0;
    for (int r = 0; r < n; r++)
        if (dead[r]) {
            x = r;
            nd++;
        }
    int outside = 0;
    for (int r = 0; nd == 1 && r < n; r++)
        outside |= !dead[r] && phx_team_of(r, t) != phx_team_of(x, t);
    int partial = nd == 1 && outside;
    for (int r = 0; r < n; r++)
        rb[r] = !partial || phx_team_of(r, t) == phx_team_of(x, t);
    return partial ? PHX_TEAM_PARTIAL : PHX_TEAM_GLOBAL;
}

static int pair_cmp(const void *a, const void *b)
{
    const struct phx_team_pair *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return x->ssn < y->ssn ? 1 : x->ssn > y->ssn ? -1 : 0;   /* highest ssn first */
}

int phx_team_relog_add(phx_team_relog_t *r, uint64_t src, uint64_t dst, uint64_t ssn)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        struct phx_team_pair *p = realloc(r->p, cap * sizeof *p);
        if (!p)
            return PHX_ENOMEM;
        r->p = p;
        r->cap = cap;
    }
    r->p[r->n++] = (struct phx_team_pair){ src, dst, ssn };
    r->sealed = 0;
    return 0;
}

void phx_team_relog_seal(phx_team_relog_t *r)
{
    if (r->n)
        qsort(r->p, r->n, sizeof *r->p, pair_cmp);
    size_t k = 0;   /* one entry per pair: its highest ssn */
    for (size_t i = 0; i < r->n; i++)
        if (!k || r->p[k - 1].src != r->p[i].src || r->p[k - 1].dst != r->p[i].dst)
            r->p[k++] = r->p[i];
    r->n = k;
    r->sealed = 1;
}

int phx_team_relog_skip(const phx_team_relog_t *r, uint64_t src, uint64_t dst, uint64_t ssn)
{
    if (!r->sealed)
        return 0;
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct phx_team_pair *p = &r->p[mid];
        if (p->src < src || (p->src == src && p->dst < dst))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && r->p[lo].src == src && r->p[lo].dst == dst && ssn <= r->p[lo].ssn;
}

void phx_team_relog_clear(phx_team_relog_t *r)
{
    free(r->p);
    *r = (phx_team_relog_t){ 0 };
}

void phx_team_own_add(phx_team_own_t *o, const phx_det_t *d)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 1024;
        phx_det_t *p = realloc(o->d, cap * sizeof *p);
        if (!p) {
            o->err = 1;
            return;
        }
        o->d = p;
        o->cap = cap;
    }
    o->d[o->n++] = *d;
}

void phx_team_own_clear(phx_team_own_t *o)
{
    free(o->d);
    *o = (phx_team_own_t){ 0 };
}

#include "ft/hb/bcast.h"

#include <stdlib.h>

#include "base/phx_err.h"

struct phx_ft_bcast {
    int nranks, origin;
    int n;          /* members */
    int k;          /* cube dimension */
    int ncubes;
    int oidx;       /* origin's index in live[] */
    int *live;      /* sorted member ranks; NULL: all ranks (no dead), by arithmetic */
};

int phx_ft_bcast_create(int nranks, int origin, const int *dead, size_t ndead,
                        phx_ft_bcast_t **out)
{
    if (!out || nranks < 1 || origin < 0 || origin >= nranks || (ndead && !dead))
        return PHX_EINVAL;
    if (!ndead) {   /* every rank a member: O(1), no tables (the compact broadcast's case) */
        phx_ft_bcast_t *b = calloc(1, sizeof(*b));
        if (!b)
            return PHX_ENOMEM;
        int k = 0;
        while ((2 << k) <= nranks && k < 30)
            k++;
        *b = (phx_ft_bcast_t){ .nranks = nranks, .origin = origin, .n = nranks, .k = k,
                               .ncubes = nranks == 1 ? 0 : (nranks == (1 << k) ? 1 : 2),
                               .oidx = origin };
        *out = b;
        return 0;
    }
    uint8_t *mark = calloc((size_t)nranks, 1);
    if (!mark)
        return PHX_ENOMEM;
    for (size_t i = 0; i < ndead; i++) {
        if (dead[i] < 0 || dead[i] >= nranks || dead[i] == origin) {
            free(mark);
            return PHX_EINVAL;
        }
        mark[dead[i]] = 1;
    }
    phx_ft_bcast_t *b = calloc(1, sizeof(*b));
    int *live = malloc(sizeof(int) * (size_t)nranks);
    if (!b || !live) {
        free(mark);
        free(b);
        free(live);
        return PHX_ENOMEM;
    }
    int n = 0;
    for (int r = 0; r < nranks; r++) {
        if (r == origin)
            b->oidx = n;
        if (!mark[r])
            live[n++] = r;
    }
    free(mark);
    int k = 0;
    while ((2 << k) <= n && k < 30)
        k++;
    b->nranks = nranks;
    b->origin = origin;
    b->n = n;
    b->k = k;
    b->ncubes = n == 1 ? 0 : (n == (1 << k) ? 1 : 2);
    b->live = live;
    *out = b;
    return 0;
}

void phx_ft_bcast_destroy(phx_ft_bcast_t *b)
{
    if (!b)
        return;
    free(b->live);
    free(b);
}

int phx_ft_bcast_members(const phx_ft_bcast_t *b) { return b->n; }
int phx_ft_bcast_dim(const phx_ft_bcast_t *b) { return b->k; }
int phx_ft_bcast_ncubes(const phx_ft_bcast_t *b) { return b->ncubes; }
int phx_ft_bcast_tolerance(const phx_ft_bcast_t *b) { return b->k > 0 ? b->k - 1 : 0; }
/* One hop to the tree root, then at most k down a binomial tree. */
int phx_ft_bcast_max_hops(const phx_ft_bcast_t *b) { return b->ncubes ? b->k + 1 : 0; }

/* Cube coordinate <-> rotated member index. */
static int cube_to_idx(const phx_ft_bcast_t *b, int cube, int c)
{
    if (cube == 0 || c == 0)
        return c;
    return b->n - (1 << b->k) + c;
}

static int idx_to_cube(const phx_ft_bcast_t *b, int cube, int idx)
{
    int size = 1 << b->k;
    if (cube == 0)
        return idx < size ? idx : -1;
    if (idx == 0)
        return 0;
    int c = idx - (b->n - size);
    return c >= 1 && c < size ? c : -1;
}

static int idx_to_rank(const phx_ft_bcast_t *b, int idx)
{
    return b->live ? b->live[(b->oidx + idx) % b->n] : (b->oidx + idx) % b->n;
}

static int rank_to_idx(const phx_ft_bcast_t *b, int rank)
{
    if (!b->live)
        return rank >= 0 && rank < b->n ? (rank - b->oidx + b->n) % b->n : -1;
    int lo = 0, hi = b->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (b->live[mid] == rank)
            return (mid - b->oidx + b->n) % b->n;
        if (b->live[mid] < rank)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void put_hop(phx_ft_bcast_hop_t *out, size_t cap, int *cnt, int dst, int cube, int tree)
{
    if ((size_t)*cnt < cap)
        out[*cnt] = (phx_ft_bcast_hop_t){ dst, (uint8_t)cube, (uint8_t)tree };
    (*cnt)++;
}

int phx_ft_bcast_start(const phx_ft_bcast_t *b, phx_ft_bcast_hop_t *out, size_t cap)
{
    int cnt = 0;
    for (int cube = 0; cube < b->ncubes; cube++)
        for (int j = 0; j < b->k; j++)
            put_hop(out, cap, &cnt, idx_to_rank(b, cube_to_idx(b, cube, 1 << j)), cube, j);
    return cnt;
}

int phx_ft_bcast_forward(const phx_ft_bcast_t *b, int me, unsigned cube, unsigned tree,
                         phx_ft_bcast_hop_t *out, size_t cap)
{
    if (cube >= (unsigned)b->ncubes || tree >= (unsigned)b->k || me == b->origin)
        return PHX_EINVAL;
    int idx = rank_to_idx(b, me);
    int c = idx < 0 ? -1 : idx_to_cube(b, (int)cube, idx);
    if (c <= 0)
        return PHX_EINVAL;
    int k = b->k, j = (int)tree;
    /* Tree j visits dimension (j+1+t) % k at step t; w is the address
     * relative to its root 1<<j, and its last set step says when it got the
     * copy. It forwards along every later step. */
    int w = c ^ (1 << j), last = -1;
    for (int t = 0; t < k; t++)
        if (w & (1 << ((j + 1 + t) % k)))
            last = t;
    int cnt = 0;
    for (int t = last + 1; t < k; t++) {
        int child = (w ^ (1 << ((j + 1 + t) % k))) ^ (1 << j);
        if (child == 0)
            continue;   /* the root's last step leads back to the origin */
        put_hop(out, cap, &cnt, idx_to_rank(b, cube_to_idx(b, (int)cube, child)), (int)cube, j);
    }
    return cnt;
}

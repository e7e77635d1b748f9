#include "ft/hb/ring.h"

#include <stdlib.h>

#include "base/phx_err.h"

struct host_slot {
    uint32_t id;
    int first;   /* index into the rank list sorted by (host, rank) */
    int size;
    int left;    /* ranks of this host not yet placed */
};

struct hr {
    uint32_t host;
    int rank;
};

static int cmp_hr(const void *a, const void *b)
{
    const struct hr *x = a, *y = b;
    if (x->host != y->host)
        return x->host < y->host ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

int phx_ft_ring_build(int n, const uint32_t *host, int *ring)
{
    if (n < 1 || !host || !ring)
        return PHX_EINVAL;
    struct hr *byhost = malloc(sizeof(*byhost) * (size_t)n);
    struct host_slot *hs = malloc(sizeof(*hs) * (size_t)n);
    if (!byhost || !hs) {
        free(byhost);
        free(hs);
        return PHX_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        byhost[i] = (struct hr){ host[i], i };
    qsort(byhost, (size_t)n, sizeof(*byhost), cmp_hr);
    int nh = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || byhost[i].host != hs[nh - 1].id)
            hs[nh++] = (struct host_slot){ byhost[i].host, i, 0, 0 };
        hs[nh - 1].size++;
        hs[nh - 1].left++;
    }
    /* Greedy: the host with most ranks left that differs from the previous
     * one. Treating the first host as owning one extra rank models the
     * wrap-around edge back to ring[0], so the cycle closes without a
     * conflict whenever one can be avoided. Ties go to the next host after
     * the previous one in id order, which makes equal hosts round-robin. */
    int prev = -1, h0 = -1;
    for (int pos = 0; pos < n; pos++) {
        int best = -1, bestp = -1, bestd = 0;
        for (int step = 1; step <= nh; step++) {
            int h = (prev + step + nh) % nh;   /* prev == -1 starts at 0 */
            if (hs[h].left == 0 || h == prev)
                continue;
            int p = hs[h].left + (h == h0);
            if (p > bestp || (p == bestp && step < bestd)) {
                best = h;
                bestp = p;
                bestd = step;
            }
        }
        if (best < 0)
            best = prev;          /* only the previous host has ranks left */
        struct host_slot *s = &hs[best];
        /* Ranks of a host are consumed in ascending order. */
        ring[pos] = byhost[s->first + (s->size - s->left)].rank;
        s->left--;
        if (h0 < 0)
            h0 = best;
        prev = best;
    }
    free(byhost);
    free(hs);
    return 0;
}

int phx_ft_ring_conflicts(int n, const uint32_t *host, const int *ring)
{
    if (n < 2)
        return 0;
    int c = 0;
    for (int i = 0; i < n; i++)
        c += host[ring[i]] == host[ring[(i + 1) % n]];
    return c;
}

int phx_ft_ring_invert(int n, const int *ring, int *pos)
{
    if (n < 1 || !ring || !pos)
        return PHX_EINVAL;
    for (int r = 0; r < n; r++)
        pos[r] = -1;
    for (int i = 0; i < n; i++) {
        if (ring[i] < 0 || ring[i] >= n || pos[ring[i]] >= 0)
            return PHX_EINVAL;
        pos[ring[i]] = i;
    }
    return 0;
}

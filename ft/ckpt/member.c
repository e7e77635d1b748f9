#include "ft/ckpt/member.h"

#include <stdlib.h>
#include <string.h>

#include "ft/ckpt/ckpt.h"
#include "base/phx_err.h"

int phx_ck_relocate_spare(int n, int nloc, const int *loc_e, const int *buddy_e, const uint8_t *dead,
                          int first_spare, int slices, int *loc, int *lost, int *lost_buddy, int *nspared)
{
    /* A spare is free when it hosts no slice but its own home's (which the
     * program never fills) at the epoch, and nobody took it in this call:
     * an earlier stand-in is a full member now. */
    uint8_t *busy = calloc((size_t)n, 1);
    int *sub = malloc((size_t)n * sizeof *sub), *tmp = malloc((size_t)nloc * sizeof *tmp);
    int rc = !busy || !sub || !tmp ? PHX_ENOMEM : slices > 0 ? 0 : PHX_EINVAL, k = 0;
    for (int i = 0; !rc && i < nloc; i++) {
        if (loc_e[i] < 0 || loc_e[i] >= n)
            rc = PHX_EINVAL;
        else if (loc_e[i] < first_spare || i / slices != loc_e[i])
            busy[loc_e[i]] = 1;
    }
    for (int x = 0, s = first_spare < 0 ? 0 : first_spare; !rc && x < n; x++) {
        sub[x] = x;
        if (!dead[x] || (x >= first_spare && !busy[x]))
            continue;
        int b = buddy_e[x];
        if (b < 0 || b >= n || dead[b]) {
            *lost = x;
            *lost_buddy = b;
            rc = PHX_EUNRECOVERABLE;
            break;
        }
        while (s < n && (dead[s] || busy[s]))
            s++;
        if (s < n) {
            sub[x] = s;
            busy[s] = 1;
            k++;
        }
    }
    if (!rc) {
        for (int i = 0; i < nloc; i++)
            tmp[i] = sub[loc_e[i]];
        /* Slices whose host found no spare spread as usual. */
        rc = phx_ck_relocate(n, nloc, tmp, buddy_e, dead, loc, lost, lost_buddy);
    }
    if (nspared)
        *nspared = k;
    free(busy);
    free(sub);
    free(tmp);
    return rc;
}

/* ---- membership change ----------------------------------------------------- */

int phx_ck_join_init(phx_ck_join_t *j, int n)
{
    j->n = n;
    j->inc = calloc((size_t)n, sizeof *j->inc);
    j->seen = calloc((size_t)n * (size_t)n, 1);
    return j->inc && j->seen ? 0 : PHX_ENOMEM;
}

void phx_ck_join_free(phx_ck_join_t *j)
{
    free(j->inc);
    free(j->seen);
    j->inc = NULL;
    j->seen = NULL;
}

int phx_ck_join_seen(phx_ck_join_t *j, int from, int x, uint32_t inc)
{
    if (from < 0 || from >= j->n || x < 0 || x >= j->n || !inc || inc < j->inc[x])
        return 0;
    if (inc > j->inc[x]) {
        j->inc[x] = inc;
        memset(j->seen + (size_t)x * (size_t)j->n, 0, (size_t)j->n);
    }
    j->seen[(size_t)x * (size_t)j->n + (size_t)from] = 1;
    return 1;
}

int phx_ck_join_ready(const phx_ck_join_t *j, int x, const uint8_t *dead, uint32_t *inc)
{
    if (x < 0 || x >= j->n || !j->inc[x])
        return 0;
    for (int r = 0; r < j->n; r++)
        if (!dead[r] && !j->seen[(size_t)x * (size_t)j->n + (size_t)r])
            return 0;
    *inc = j->inc[x];
    return 1;
}

void phx_ck_join_clear(phx_ck_join_t *j, int x)
{
    if (x < 0 || x >= j->n)
        return;
    j->inc[x] = 0;
    memset(j->seen + (size_t)x * (size_t)j->n, 0, (size_t)j->n);
}

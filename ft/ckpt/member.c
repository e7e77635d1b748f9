#include "ft/ckpt/member.h"

#include <stdlib.h>
#include <string.h>

#include "ft/ckpt/ckpt.h"
#include "phx_err.h"

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

/* The partial-or-global rule of message logging (multi.h). */
#include "ft/mlog/multi.h"

int phx_mld_det_store(int n, const uint8_t *dead, const uint8_t *lost, int r)
{
    for (int k = 1; r >= 0 && r < n && k < n; k++) {
        int s = (r + k) % n;
        if (!dead[s] || lost[s])
            return s;
    }
    return -1;
}

int phx_mld_partial(phx_mld_mode_t mode, int n, const uint8_t *dead, const uint8_t *lost, int replayed)
{
    if (n < 1 || !dead || !lost || (replayed != PHX_MLD_REPLAYED_NONE && replayed != PHX_MLD_REPLAYED_ENDED))
        return PHX_MLD_GLOBAL;
    int k = 0, x[2] = { -1, -1 };
    for (int r = 0; r < n; r++) {
        if (lost[r] && !dead[r])
            return PHX_MLD_GLOBAL;   /* lost must lie within dead */
        if (lost[r] && k < 2)
            x[k] = r;
        k += lost[r] != 0;
    }
    if (k == 1)   /* ENDED with one loss: no new failure, never asked */
        return replayed == PHX_MLD_REPLAYED_NONE ? PHX_MLD_PARTIAL : PHX_MLD_GLOBAL;
    if (k != 2)
        return PHX_MLD_GLOBAL;
    if (mode == PHX_MLD_FAST)
        return replayed == PHX_MLD_REPLAYED_NONE ? PHX_MLD_PARTIAL : PHX_MLD_GLOBAL;
    if (mode != PHX_MLD_PESSIMISTIC)
        return PHX_MLD_GLOBAL;
    for (int i = 0; i < 2; i++) {
        int s = phx_mld_det_store(n, dead, lost, x[i]);
        if (s < 0 || lost[s])
            return PHX_MLD_GLOBAL;
    }
    return PHX_MLD_PARTIAL;
}

/* Per-rank progress of a period's partial rounds (ft/mlog/round.h). */
#include "ft/mlog/round.h"

void phx_ml_round_note(uint8_t *last, int n, int rank, uint32_t round)
{
    if (rank >= 0 && rank < n && round > last[rank] && round < PHX_ML_ROUND_MAX)
        last[rank] = (uint8_t)round;
}

int phx_ml_round_all(const uint8_t *last, const uint8_t *dead, int n, int round)
{
    for (int r = 0; r < n; r++)
        if (!dead[r] && last[r] < round)
            return 0;
    return 1;
}

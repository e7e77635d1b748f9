/* Process-wide tunables of the credit detectors (see td_credit.h). */
#include "base/phx_err.h"
#include "ft/termination/td_credit.h"

static phx_td_credit_cfg_t g_cfg = {
    .c_init = 1ull << 32, .c_max = 1ull << 62, .c_con = 1ull << 16,
    .w_con = 1ull << 8, .c_borrow = 1ull << 10,
};

void phx_td_credit_defaults(phx_td_credit_cfg_t *cfg)
{
    *cfg = (phx_td_credit_cfg_t){
        .c_init = 1ull << 32, .c_max = 1ull << 62, .c_con = 1ull << 16,
        .w_con = 1ull << 8, .c_borrow = 1ull << 10,
    };
}

int phx_td_credit_set(const phx_td_credit_cfg_t *cfg)
{
    /* c_max <= 2^62 keeps credit + piggyback below 2^63: no u64 wrap */
    if (!cfg || cfg->c_init < 1 || cfg->c_init > cfg->c_max || cfg->c_max > (1ull << 62) ||
        cfg->w_con < 1)
        return PHX_EINVAL;
    g_cfg = *cfg;
    return 0;
}

void phx_td_credit_get(phx_td_credit_cfg_t *cfg) { *cfg = g_cfg; }

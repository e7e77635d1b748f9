/* INDEP (the adoption paper, section 5; see td_ds.h): survives any failure set without
 * communication edges. The protocol lives in td_ds.c. */
#include "ft/termination/td_ds.h"

static int indep_create(const phx_td_env_t *env, void **out)
{
    return phx_td_ds_create(env, PHX_DS_INDEP, out);
}

const phx_td_ops_t phx_td_indep_ops = {
    .name = "indep", .fault_tolerant = 1, .pb_size = 0,
    .create = indep_create, .destroy = phx_td_ds_destroy, .start = phx_td_ds_start,
    .on_send = phx_td_ds_on_send, .on_recv = phx_td_ds_on_recv,
    .on_processed = phx_td_ds_on_processed, .on_idle = phx_td_ds_on_idle,
    .on_busy = phx_td_ds_on_busy, .on_ctrl = phx_td_ds_on_ctrl,
    .on_failure = phx_td_ds_on_failure, .stats = phx_td_ds_stats,
};

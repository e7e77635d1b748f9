/* RELLAZY and RELEAGER (the adoption paper, section 6; see td_ds.h): survive any failure set
 * without a parent/interior-child pair. The piggyback is the sender's parent
 * (4 bytes LE, -1 for the root), from which a newly engaged node learns its
 * grandparent. The protocol lives in td_ds.c. */
#include "ft/termination/td_ds.h"

static int rellazy_create(const phx_td_env_t *env, void **out)
{
    return phx_td_ds_create(env, PHX_DS_RELLAZY, out);
}

static int releager_create(const phx_td_env_t *env, void **out)
{
    return phx_td_ds_create(env, PHX_DS_RELEAGER, out);
}

#define REL_OPS(nm, cr)                                                              \
    {                                                                                \
        .name = nm, .fault_tolerant = 1, .pb_size = 4, .create = cr,                 \
        .destroy = phx_td_ds_destroy, .start = phx_td_ds_start,                      \
        .on_send = phx_td_ds_on_send, .on_recv = phx_td_ds_on_recv,                  \
        .on_processed = phx_td_ds_on_processed, .on_idle = phx_td_ds_on_idle,        \
        .on_busy = phx_td_ds_on_busy, .on_ctrl = phx_td_ds_on_ctrl,                  \
        .on_failure = phx_td_ds_on_failure, .stats = phx_td_ds_stats,                \
    }

const phx_td_ops_t phx_td_rellazy_ops = REL_OPS("rellazy", rellazy_create);
const phx_td_ops_t phx_td_releager_ops = REL_OPS("releager", releager_create);

/* Quiescence at the cut. See quiet.h. */
#include "ft/ckpt/quiet.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

int phx_ck_quiet_init(phx_ck_quiet_t *q, int size, uint64_t min_gap_ms, uint64_t max_gap_ms)
{
    memset(q, 0, sizeof *q);
    q->size = size;
    q->idle = calloc((size_t)size, 1);
    q->in = calloc((size_t)size, 1);
    q->queued = calloc((size_t)size, sizeof *q->queued);
    if (!q->idle || !q->in || !q->queued) {
        phx_ck_quiet_free(q);
        return PHX_ENOMEM;
    }
    q->min_gap = min_gap_ms ? min_gap_ms : 1;
    q->max_gap = max_gap_ms > q->min_gap ? max_gap_ms : q->min_gap;
    q->gap = q->min_gap;
    return 0;
}

void phx_ck_quiet_free(phx_ck_quiet_t *q)
{
    free(q->idle);
    free(q->in);
    free(q->queued);
    q->idle = q->in = NULL;
    q->queued = NULL;
}

void phx_ck_quiet_idle(phx_ck_quiet_t *q, int rank, int idle)
{
    if (rank >= 0 && rank < q->size)
        q->idle[rank] = idle != 0;
}

int phx_ck_quiet_want(const phx_ck_quiet_t *q, const uint8_t *dead, uint64_t now_ms)
{
    if (now_ms < q->next)
        return 0;
    for (int r = 0; r < q->size; r++)
        if (!dead[r] && !q->idle[r])
            return 0;
    return 1;
}

void phx_ck_quiet_begin(phx_ck_quiet_t *q, uint64_t id)
{
    q->id = id;
    memset(q->in, 0, (size_t)q->size);
}

void phx_ck_quiet_count(phx_ck_quiet_t *q, int rank, uint64_t id, uint64_t n)
{
    if (id != q->id || rank < 0 || rank >= q->size)
        return;
    q->in[rank] = 1;
    q->queued[rank] = n;
}

int phx_ck_quiet_decide(phx_ck_quiet_t *q, uint64_t id, const uint8_t *dead, int probe, uint64_t now_ms)
{
    int quiet = id == q->id;
    for (int r = 0; r < q->size && quiet; r++)
        if (!dead[r] && (!q->in[r] || q->queued[r]))
            quiet = 0;
    if (probe && !quiet) {
        q->next = now_ms + q->gap;
        q->gap = 2 * q->gap < q->max_gap ? 2 * q->gap : q->max_gap;
    }
    return quiet;
}

void phx_ck_quiet_reset(phx_ck_quiet_t *q)
{
    memset(q->idle, 0, (size_t)q->size);
    memset(q->in, 0, (size_t)q->size);
    q->id = 0;
}

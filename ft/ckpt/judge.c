#include "ft/ckpt/judge.h"

#include <stdlib.h>

#include "ft/ckpt/ckpt.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/recover.h"

void phx_ck_judge(const phx_ck_judge_in_t *in, phx_ck_judge_t *out)
{
    *out = (phx_ck_judge_t){ .verdict = PHX_CK_JUDGE_DECIDE, .epoch = in->epoch, .lost = -1, .lost_buddy = -1 };
    int bad = !in->epoch || !in->loc_e || in->reloc, disk = 0;
    if (in->reloc) {
        out->lost = in->lost;
        out->lost_buddy = in->lost_buddy;
    }
    uint64_t de;
    if (bad && in->disk && in->disk(in->disk_arg, &de)) {
        /* Both memory copies of some node are gone: the disk has them. */
        out->epoch = de;
        bad = 0;
        disk = 1;
    }
    if (bad) {
        out->verdict = PHX_CK_JUDGE_ABORT;
        return;
    }
    out->lost = out->lost_buddy = -1;
    /* Message logging recovers the failures of one checkpoint period
     * partially where the mode's rule says every determinant they need
     * survives (without a rule: one failure). The rule sees the ranks dead
     * since the epoch and whether a live rank restored in a round since
     * the epoch already: a later failure would need a partial round's moved
     * tasks rolled back alone, and after a global one the lost tasks run
     * elsewhere already. The reports of this round's dead set all arrived,
     * so any coordinator decides alike. The disk's table is not the
     * epoch's: `since` comes from the memory copy's, as the runtime's did. */
    uint8_t *since = calloc((size_t)in->n, 1);
    int nsince = since ? phx_ck_dead_since(in->n, in->nloc, in->loc_e, in->dead, since) : 0;
    int replayed = in->summary & PHX_CK_REC_J_ENDED      ? PHX_CK_REPLAYED_ENDED
                 : in->summary & PHX_CK_REC_J_REPLAYED ? PHX_CK_REPLAYED_OTHER
                                                       : PHX_CK_REPLAYED_NONE;
    int rule = !since ? 0 : in->when ? in->when(in->when_arg, in->dead, since, replayed) : nsince == 1 && !replayed;
    free(since);
    /* ... and only where no live rank moved tasks home since the epoch
     * (its table is no longer the epoch's), not from disk, and where some
     * live rank keeps running. */
    int partial = in->partial_ok && rule && !disk && !(in->summary & PHX_CK_REC_J_MOVED) && in->keeps;
    int seq = partial && replayed == PHX_CK_REPLAYED_ENDED;
    if (!partial && in->joins_missing) {
        out->verdict = PHX_CK_JUDGE_WAIT;   /* every lost rank comes back first */
        return;
    }
    out->flags = (disk ? PHX_CK_D_DISK : 0) | (partial ? PHX_CK_D_PARTIAL : 0) | (seq ? PHX_CK_D_SEQ : 0);
}

void phx_ck_seq_keep(int nloc, const int *cur, const uint8_t *dead, const int *loc, int *keep)
{
    for (int i = 0; i < nloc; i++)
        keep[i] = dead[cur[i]] ? loc[i] : -1;
}

/* recovery=cr: the recovery round's glue. ft/ckpt/recover.h decides the
 * round (reports, decision, restore order, DONE/GO), ft/ckpt/judge.h what
 * a complete round does (disk copies, partial rounds, newcomers); here
 * their actions are carried out: control frames, the judgement's inputs,
 * relocation of the dead ranks' slices, the restores themselves, the end
 * of the round. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt_disk.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/cr_int.h"
#include "ft/ckpt/judge.h"

_Static_assert((int)PHX_CK_REPLAYED_NONE == (int)PHX_CR_REPLAYED_NONE &&
                   (int)PHX_CK_REPLAYED_ENDED == (int)PHX_CR_REPLAYED_ENDED &&
                   (int)PHX_CK_REPLAYED_OTHER == (int)PHX_CR_REPLAYED_OTHER,
               "the logging mode's rule reads phx_ck_judge's replayed values");

static void do_rollback(cr_t *c);

/* What a memory restore's actions work on (do_rollback). */
typedef struct rb_ctx {
    phx_ck_copy_t *slot;        /* the epoch's copies */
    const int *loc, *keep;      /* the new table; what moves in this round */
} rb_ctx_t;
/* Carries out the machine's actions in order (k: a restore's, else NULL),
 * ending the job at the first that fails, and frees o. */
static void run(cr_t *c, phx_ck_rec_out_t *o, const rb_ctx_t *k);

static phx_ck_rec_view_t view(const cr_t *c)
{
    return (phx_ck_rec_view_t){ .dead = c->dead, .round = c->ndead, .coord = cr_coord(c), .rec = c->phase == PH_REC };
}

/* STATE, DECIDE and COMMIT-with-joins payloads (phx_ck_eset_t): epoch e,
 * this node's dead set, flags; with joins the newcomers' tail (loc,
 * buddy: the tables they take; buddy NULL: none). malloc'd; NULL after
 * ending the job. */
static uint8_t *enc_eset(cr_t *c, uint64_t e, int flags, int joins, const int *loc, const int *buddy, size_t *len)
{
    size_t cap = phx_ck_eset_len(c->size, c->nloc, joins);
    uint8_t *buf = malloc(cap);
    uint32_t *incs = joins ? calloc((size_t)c->size, sizeof *incs) : NULL;
    if (!buf || (joins && !incs)) {
        free(buf);
        free(incs);
        cr_fatal(c, 1, "%s", "out of memory in the recovery protocol");
        return NULL;
    }
    for (int x = 0; joins && x < c->size; x++)
        incs[x] = phx_ck_rj_ready_inc(c->rj.m, x, c->dead);
    phx_ck_eset_t m = { .epoch = e, .dead = c->dead, .flags = (uint8_t)flags, .joins = joins,
                        .view = (uint16_t)(phx_ck_rj_view_of(c->rj.m) + 1), .incs = incs, .loc = loc, .buddy = buddy };
    *len = (size_t)phx_ck_eset_enc(&m, c->size, c->nloc, buf, cap);
    free(incs);
    return buf;
}

/* STATE: this node's committed epoch and dead set, to the coordinator. */
static void rb_send_state(cr_t *c, int dst)
{
    size_t len;
    uint8_t *buf = enc_eset(c, c->store.committed, c->pr, 0, NULL, NULL, &len);
    if (!buf)
        return;
    cr_ctl(c, dst, RB_STATE, (uint64_t)c->ndead, buf, len);
    free(buf);
}

/* Restores epoch rb_epoch from DIR: file i goes to the i-th live rank
 * (round robin), so a job restarted on fewer or more nodes re-places them. */
static void do_rollback_disk(cr_t *c)
{
    phx_node_t *n = c->n;
    phx_ckd_manifest_t m;
    if (phx_ckd_find(c->disk.dir, c->disk.tag, cr_rb_epoch(c), &m) || m.epoch != cr_rb_epoch(c) || m.nhome > c->nhome ||
        m.slices != PHX_LOC_SLICES) {
        fprintf(stderr, "phalanx: recovery=cr: disk checkpoint of epoch %llu in %s is not usable\n",
                (unsigned long long)cr_rb_epoch(c), c->disk.dir);
        phx_node_exit(n, PHX_EXIT_CKPT_LOST, 1);
        return;
    }
    int nlive = 0, *live = malloc((size_t)c->size * sizeof *live);
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    int rc = live && loc ? 0 : PHX_ENOMEM;
    for (int r = 0; live && r < c->size; r++)
        if (!c->dead[r])
            live[nlive++] = r;
    for (int j = 0; !rc && j < c->nloc; j++) {
        int h = j / PHX_LOC_SLICES;
        loc[j] = h < c->size ? h : live[h % nlive];
        if (h >= m.nhome)
            continue;
        int i = 0;
        while (i < m.nfiles && m.ranks[i] != m.loc[j])
            i++;
        if (i == m.nfiles)
            rc = PHX_EPROTO;
        else
            loc[j] = live[i % nlive];
    }
    if (!rc) {
        cr_discard_all(c, 0);
        cr_ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
        c->filt.round = (uint64_t)c->ndead;
    }
    uint32_t nt = 0;
    for (int i = 0; i < m.nfiles && !rc; i++) {
        int mine = live[i % nlive] == c->self;
        if (!mine && m.ranks[i] != c->self)
            continue;
        void *blob;
        size_t len;
        if ((rc = phx_ckd_read_rank(c->disk.dir, c->disk.tag, m.epoch, m.ranks[i], &blob, &len)))
            break;
        if (mine)
            rc = cr_restore_blob(c, blob, len, 0, NULL, &nt);
        cr_seq_at_least(n, cr_blob_seq(blob, len) + (m.ranks[i] == c->self));
        if (m.ranks[i] == c->self)
            atomic_store(&n->creator, cr_blob_creator(blob, len));
        free(blob);
    }
    if (!rc) {
        memcpy(c->loc, loc, (size_t)c->nloc * sizeof *loc);
        n->loc_n = c->nhome;
        n->loc = c->loc;
        phx_ck_store_commit(&c->store, m.epoch);
        phx_evlog("rollback", "\"epoch\":%llu,\"round\":%d,\"disk\":1", (unsigned long long)m.epoch, c->ndead);
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"disk\"", nt);
        phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    }
    free(live);
    free(loc);
    phx_ckd_manifest_free(&m);
    if (rc) {
        cr_fatal(c, PHX_EXIT_CKPT_LOST, "restoring the disk checkpoint failed: %s", phx_strerror(rc));
        return;
    }
    c->restarting = 0;
    cr_rb_restored(c);
}

/* The table after the losses in c->dead, by restart-on (spare: a spare
 * stands in for each lost rank while spares last). recovery-helpers bounds
 * the survivors taking each lost rank's slices, in partial (mlog) rounds
 * and cr's global ones alike: one rule, so a fallback from a partial round
 * places tasks as the partial round would have. */
static int relocate(cr_t *c, const phx_ck_copy_t *slot, int *loc, int *lost, int *lost_buddy)
{
    if (c->n->cfg.spares && c->n->cfg.restart_mode == PHX_RESTART_SPARE)
        return phx_ck_relocate_spare(c->size, c->nloc, slot->loc, slot->buddy, c->dead, c->n->app_size,
                                     PHX_LOC_SLICES, loc, lost, lost_buddy, NULL);
    return phx_ck_relocate_p(c->size, c->nloc, slot->loc, slot->buddy, c->dead, c->n->cfg.recovery_helpers, loc, lost,
                             lost_buddy);
}

/* OWN: restores this node's copy (a partial round: only a team-mate's). */
static int restore_own(cr_t *c, const phx_ck_copy_t *slot)
{
    int rc = 0;
    /* mlog-team: the dead node's team-mates reload their own copy too. */
    int team = cr_rb_partial(c) && cr_rolls_back(c, c->self);
    if (cr_rb_partial(c)) {
        /* Survivors keep running state, queues and links: nothing is stale. */
        phx_evlog("partial_restore", "\"epoch\":%llu,\"round\":%d", (unsigned long long)cr_rb_epoch(c), c->ndead);
        if (c->lis)   /* before on_restore of any task of this round */
            c->lis(c->lis_arg, PHX_CR_PARTIAL_BEGIN, cr_rb_epoch(c));
    }
    if (!cr_rb_partial(c) || team) {
        cr_discard_all(c, 0);
        /* The marker closes the lost future on every link. A team-mate
         * sends none: the others keep running, and what its old run sent
         * them equals what its replay sends again (dropped by SSN). */
        if (!team) {
            cr_ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
            c->filt.round = (uint64_t)c->ndead;
        }
        uint32_t nt = 0;
        rc = cr_restore_blob(c, slot->own, slot->own_len, 1, NULL, &nt);
        phx_evlog(team ? "team_rollback" : "rollback", "\"epoch\":%llu,\"round\":%d",
                  (unsigned long long)cr_rb_epoch(c), c->ndead);
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"local\"", nt);
        phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    }
    return rc;
}

/* HELD / XFER: restores the slices of x's copy (kept here as its buddy, or
 * shipped here by via) that move here. */
static int restore_copy(cr_t *c, const rb_ctx_t *k, const phx_ck_rec_act_t *a)
{
    int held = a->kind == PHX_CK_REC_HELD;
    const void *blob = held ? k->slot->held[a->x] : c->xfer.blob[a->x];
    size_t len = held ? k->slot->held_len[a->x] : c->xfer.len[a->x];
    if (!blob)
        return PHX_ENOENT;
    uint32_t nt = 0;
    int rc = cr_restore_blob(c, blob, len, 0, k->keep, &nt);
    if (held)
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d", nt, a->x, c->self);
    else
        phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d,\"via\":%d", nt, a->x,
                  c->self, a->via);
    phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    return rc;
}

/* A newcomer keeps blob as its own copy of epoch e, under the tables it
 * was taken in with (the store owns blob from here; not on failure, when
 * the job ends), and routes by that table from now on. */
int cr_adopt_epoch(cr_t *c, uint64_t e, void *blob, size_t len)
{
    phx_ck_copy_t *slot = phx_ck_store_open(&c->store, e);
    if (!slot || phx_ck_store_put_own(&c->store, e, blob, len)) {
        cr_fatal(c, 1, "%s", "no checkpoint slot for the rejoin (internal error)");
        return PHX_EINVAL;
    }
    memcpy(slot->loc, phx_ck_rj_loc(c->rj.m), (size_t)c->nloc * sizeof *c->loc);
    memcpy(slot->buddy, phx_ck_rj_buddy(c->rj.m), (size_t)c->size * sizeof *c->buddy);
    phx_ck_store_commit(&c->store, e);
    memcpy(c->loc, phx_ck_rj_loc(c->rj.m), (size_t)c->nloc * sizeof *c->loc);
    c->n->loc_n = c->nhome;
    c->n->loc = c->loc;
    return 0;
}

/* ROLLBACK to the decided epoch. */
static void do_rollback(cr_t *c)
{
    int seq = phx_ck_rec_flags(c->rec) & PHX_CK_D_SEQ;
    /* Reported in later rounds of this period (multi.h: `replayed`). */
    c->pr |= 1;
    if (phx_ck_rec_flags(c->rec) & PHX_CK_D_DISK) {
        do_rollback_disk(c);
        return;
    }
    if (phx_ck_rj_joining(c->rj.m)) {
        cr_rejoin_restore(c);
        return;
    }
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, cr_rb_epoch(c));
    if (!slot || !slot->own) {
        char what[64];
        snprintf(what, sizeof what, "%llu", (unsigned long long)cr_rb_epoch(c));
        cr_fatal(c, 1, "no local copy of epoch %s to roll back to", what);
        return;
    }
    /* The decided epoch was committed (its COMMIT may not have reached us
     * before its sender died or the round began): left uncommitted here,
     * this node would open its slot again for the next checkpoint and
     * overwrite the copy a later failure must roll back to, or refuse that
     * checkpoint for want of a free slot. */
    phx_ck_store_commit(&c->store, cr_rb_epoch(c));   /* never lowers it */
    int lost = -1, lost_buddy = -1;
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    if (!loc) {
        cr_fatal(c, 1, "%s", "out of memory in recovery");
        return;
    }
    /* Sequential: from the table the period's first round made (the same
     * on every node: each ended it), moving only what the dead host now. */
    int rc = seq ? phx_ck_relocate_p(c->size, c->nloc, c->loc, slot->buddy, c->dead, c->n->cfg.recovery_helpers, loc,
                                     &lost, &lost_buddy)
                 : relocate(c, slot, loc, &lost, &lost_buddy);
    if (rc == PHX_EUNRECOVERABLE) {
        free(loc);
        return;   /* the coordinator reports it and ends the job */
    }
    /* What a buddy copy may restore here: only moving slices (the rest of
     * a dead rank's tasks already run on their earlier round's hosts). */
    int *keep = loc;
    if (!rc && seq) {
        keep = malloc((size_t)c->nloc * sizeof *keep);
        if (keep)   /* c->loc: the table before the round, until the restore replaces it */
            phx_ck_seq_keep(c->nloc, c->loc, c->dead, loc, keep);
        if (!keep) {
            free(loc);
            cr_fatal(c, 1, "%s", "out of memory in recovery");
            return;
        }
    }
    /* The machine orders the restores: own copy, buddy copies kept here
     * (shipped on to the other new hosts), those shipped here. */
    uint8_t *have = rc ? NULL : calloc((size_t)c->size, 1);
    if (!rc && !have)
        rc = PHX_ENOMEM;
    for (int x = 0; have && x < c->size; x++)
        have[x] = c->xfer.blob[x] && c->xfer.epoch[x] == cr_rb_epoch(c);
    if (!rc) {
        phx_ck_rec_tables_t t = { .nloc = c->nloc, .loc_e = slot->loc, .buddy_e = slot->buddy, .keep = keep,
                                  .have = have };
        phx_ck_rec_view_t v = view(c);
        phx_ck_rec_out_t o = { 0 };
        phx_ck_rec_restore(c->rec, &v, &t, &o);
        run(c, &o, &(rb_ctx_t){ .slot = slot, .loc = loc, .keep = keep });
    }
    free(have);
    if (keep != loc)
        free(keep);
    free(loc);
    if (rc)
        cr_fatal(c, 1, "restoring a checkpoint failed: %s", phx_strerror(rc));
}

/* Drops the shipped copies (after a recovery, or at the end). */
void cr_xfer_clear(cr_t *c)
{
    for (int x = 0; x < c->size; x++) {
        free(c->xfer.blob[x]);
        c->xfer.blob[x] = NULL;
        c->xfer.epoch[x] = 0;
    }
}

void cr_rb_progress(cr_t *c)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_progress(c->rec, &v, c->pause.paused, &o);
    run(c, &o, NULL);
}

/* The rollback was restored here without the machine's restore order
 * (from disk, or a newcomer's): DONE. */
void cr_rb_restored(cr_t *c)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_restored(c->rec, &v, &o);
    run(c, &o, NULL);
}

/* Coordinator: decide the round once everyone reported the same set. */
void cr_rb_try_decide(cr_t *c)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_try_decide(c->rec, &v, &o);
    run(c, &o, NULL);
}

/* RB_STATE from peer. */
void cr_on_state(cr_t *c, int peer, const uint8_t *p, size_t len)
{
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m) || m.joins)
        return;
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_report(c->rec, &v, peer, m.dead, m.epoch, m.flags, &o);
    run(c, &o, NULL);
}

/* RB_DONE from peer. */
void cr_on_done(cr_t *c, int peer, uint64_t round)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_done(c->rec, &v, peer, (int)round, &o);
    run(c, &o, NULL);
}

/* The newest disk checkpoint (phx_ck_judge's lookup). */
static int find_disk(void *arg, uint64_t *e)
{
    cr_t *c = arg;
    phx_ckd_manifest_t m;
    if (!c->disk.dir || phx_ckd_find(c->disk.dir, c->disk.tag, UINT64_MAX, &m))
        return 0;
    *e = m.epoch;
    phx_ckd_manifest_free(&m);
    return 1;
}

/* JUDGE: every report of the round is in and e is the highest committed
 * epoch (j: the reports' partial-round bits). ft/ckpt/judge.h decides:
 * the flags, a fall back to disk, the work lost, or a wait for newcomers
 * (cr_on_join asks again). */
static void judge(cr_t *c, uint64_t e, int j)
{
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int lost = -1, lost_buddy = -1;
    int *loc = malloc((size_t)c->nloc * sizeof *loc);
    int reloc = !loc ? PHX_ENOMEM : e && slot ? relocate(c, slot, loc, &lost, &lost_buddy) : 0;
    free(loc);
    /* A partial round only where the dead node's tasks go to the
     * survivors (a spare starts from the buddy copy alone; a respawned
     * rank is taken in at a later commit and gets its tasks back at the
     * checkpoint after), and some live rank keeps running (mlog-team). */
    int keeps = !c->rolls, missing = 0;
    for (int r = 0; !keeps && r < c->size; r++)
        keeps = !c->dead[r] && !cr_rolls_back(c, r);
    missing = phx_ck_rj_waits(c->rj.m, c->dead);
    phx_ck_judge_in_t in = {
        .n = c->size, .nloc = c->nloc, .dead = c->dead, .epoch = e, .summary = j,
        .loc_e = slot ? slot->loc : NULL, .reloc = reloc, .lost = lost, .lost_buddy = lost_buddy,
        .disk = find_disk, .disk_arg = c,
        .partial_ok = c->partial_ok && (c->n->cfg.restart_mode == PHX_RESTART_SURVIVORS || phx_ck_rj_respawn(c->rj.m)),
        .when = c->when, .when_arg = c->lis_arg, .keeps = keeps, .joins_missing = missing,
    };
    phx_ck_judge_t d;
    phx_ck_judge(&in, &d);
    if (d.verdict == PHX_CK_JUDGE_WAIT)
        return;   /* every lost rank comes back first (or rj_timer ends the job) */
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    if (d.verdict == PHX_CK_JUDGE_ABORT) {
        phx_ck_rec_abort(c->rec, &v, d.epoch, d.lost, d.lost_buddy, &o);
        run(c, &o, NULL);
        return;
    }
    if (d.flags & PHX_CK_D_DISK)
        PHX_WARN("ckpt", "memory copies lost; restoring disk epoch %llu", (unsigned long long)d.epoch);
    cr_send_decision(c, d.epoch, d.flags);
}

/* Sends an epoch set to every live rank, with the join tail when
 * newcomers are ready: they get it first, as they are not members yet.
 * loc, buddy: the tables they take (NULL buddy: none). */
void cr_ctl_eset(cr_t *c, int tag, uint64_t id, uint64_t e, int flags, int joins, const int *loc,
                     const int *buddy)
{
    size_t len;
    uint8_t *buf = enc_eset(c, e, flags, joins, loc, buddy, &len);
    if (!buf)
        return;
    if (joins) {
        for (int x = 0; x < c->size; x++)
            if (phx_ck_rj_ready_inc(c->rj.m, x, c->dead))
                cr_ctl(c, x, tag, id, buf, len);
    }
    cr_ctl_all(c, tag, id, buf, len, 1);
    free(buf);
}

void cr_send_decision(cr_t *c, uint64_t e, int disk)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_decide(c->rec, &v, e, disk, &o);
    run(c, &o, NULL);
}

/* DECIDE: to every live rank, and to the newcomers it takes in. */
static void send_decide(cr_t *c, uint64_t e, int disk)
{
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int use = slot && !disk;
    /* A partial round takes nobody in (on_all_ready does, at a commit). */
    cr_ctl_eset(c, RB_DECIDE, (uint64_t)c->ndead, e, disk, !(disk & PHX_CK_D_PARTIAL) && cr_joins_ready(c),
             use ? slot->loc : c->loc, use ? slot->buddy : NULL);
}

/* ABORT: the work is lost (a rank and its buddy both died, no disk copy). */
static void send_abort(cr_t *c, uint64_t e, int lost, int lost_buddy)
{
    uint8_t buf[PHX_CK_ABORT_LEN];
    phx_ck_abort_enc(buf, &(phx_ck_abort_t){ .lost = lost, .buddy = lost_buddy });
    for (int x = 0; x < c->size; x++)   /* newcomers connected here wait for nothing more */
        if (c->dead[x] && phx_ck_rj_connected(c->rj.m, x))
            cr_ctl(c, x, RB_ABORT, e, buf, sizeof buf);
    cr_ctl_all(c, RB_ABORT, e, buf, sizeof buf, 1);
}

int cr_on_failure(void *st, int rank)
{
    cr_t *c = st;
    if (rank < 0 || rank >= c->size || c->dead[rank])
        return 1;
    c->dead[rank] = 1;
    c->ndead++;
    c->probe.on = 0;
    c->probe.idle_sent = -1;
    phx_ck_quiet_reset(&c->probe.quiet);
    if (c->phase != PH_REC) {
        c->t_fail = phx_now_ns();
        if (c->phase == PH_CK)
            PHX_INFO("ckpt", "rank %d died during checkpoint %llu: aborted", rank, (unsigned long long)c->ck_epoch);
        c->phase = PH_REC;
    }
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_failure(c->rec, &v, &o);
    cr_bulk_drop(c, -1, BK_TX | BK_RX);   /* an aborted checkpoint's copies; a new round re-ships */
    cr_mig_reset(c);
    cr_rj_failure(c, rank);
    run(c, &o, NULL);   /* PAUSE */
    cr_progress(c);
    cr_rb_try_decide(c);   /* a new coordinator may already hold every report */
    return 1;
}

void cr_on_decide(cr_t *c, uint64_t round, const uint8_t *p, size_t len)
{
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m))
        return;
    int joins = m.joins;
    if (phx_ck_rj_joining(c->rj.m)) {   /* ours only if it takes this incarnation in */
        if (!phx_ck_rj_mine(c->rj.m, &m, c->n->inc))
            return;
        c->ndead = (int)round;
        memcpy(c->dead, m.dead, (size_t)c->size);
    }
    phx_ck_rec_view_t v = view(c);
    if (!phx_ck_rec_on_decide(c->rec, &v, (int)round, m.dead, m.epoch, m.flags & 7))
        return;   /* stale: a newer failure is known here */
    if (cr_rb_partial(c)) {
        uv_timer_stop(&c->rj.timer);   /* nobody waits for a respawn: it is taken in at a later commit */
        for (int r = 0; r < c->size; r++)   /* an aborted checkpoint's markers must not count for its redo */
            if (c->filt.ck_mark[r] > c->store.committed)
                c->filt.ck_mark[r] = c->store.committed;
    }
    int rc = joins ? cr_take_in(c, &m) : 0;
    if (rc) {
        cr_fatal(c, 1, "taking a rank back in failed: %s", phx_strerror(rc));
        return;
    }
    if (c->die_point == DIE_ROLLBACK)
        raise(SIGKILL);   /* test: a failure during a recovery */
    c->t_decide = phx_now_ns();
    cr_progress(c);
}

void cr_on_go(cr_t *c, uint64_t round)
{
    phx_ck_rec_view_t v = view(c);
    phx_ck_rec_out_t o = { 0 };
    phx_ck_rec_on_go(c->rec, &v, (int)round, &o);
    run(c, &o, NULL);
}

/* RESUME: the round is over here. */
static void end_round(cr_t *c)
{
    c->phase = PH_IDLE;
    if (cr_rb_partial(c))   /* ended: a later loss may be recovered from this table */
        c->pr = (c->pr & ~1) | 2;
    cr_xfer_clear(c);
    cr_bulk_drop(c, BK_XFER, BK_TX | BK_RX);
    if (phx_ck_rj_respawn(c->rj.m))
        uv_timer_stop(&c->rj.timer);
    phx_ck_rj_round_over(c->rj.m);   /* the lowest live rank coordinates again */
    double ms = (double)(phx_now_ns() - c->t_fail) / 1e6;
    phx_evlog("recovery_done", "\"epoch\":%llu,\"round\":%d,\"ms\":%.3f,\"stale_dropped\":%llu,\"stale_frames\":%llu",
              (unsigned long long)cr_rb_epoch(c), c->ndead, ms, (unsigned long long)c->filt.dropped,
              (unsigned long long)phx_net_stale_frames(c->n->net));
    PHX_INFO("ckpt", "recovered from epoch %llu in %.1f ms", (unsigned long long)cr_rb_epoch(c), ms);
    uint64_t now = phx_now_ns(), dec = c->t_decide > c->t_fail ? c->t_decide : c->t_fail;
    phx_metrics_recovered(&(phx_metrics_rec_t){ .epoch = cr_rb_epoch(c), .round = c->ndead, .partial = cr_rb_partial(c),
                                                 .replay = cr_rb_partial(c) && c->lis, .agree_ns = dec - c->t_fail,
                                                 .transfer_ns = now - dec, .dead = phx_ck_rec_lost(c->rec),
                                                 .size = c->size });
    if (c->lis && cr_rb_partial(c))
        c->lis(c->lis_arg, PHX_CR_PARTIAL, cr_rb_epoch(c));
    cr_resume_workers(c);
    /* The lost node's tasks now have a single copy (at their new host):
     * double it at once. */
    cr_begin_checkpoint(c);
}

static void run(cr_t *c, phx_ck_rec_out_t *o, const rb_ctx_t *k)
{
    int rc = 0;
    if (o->err) {
        cr_fatal(c, 1, "%s", "out of memory in the recovery protocol");
        o->len = 0;
    }
    for (int i = 0; i < o->len && !rc; i++) {
        const phx_ck_rec_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_REC_PAUSE:
            cr_pause_workers(c);
            break;
        case PHX_CK_REC_STATE:
            rb_send_state(c, a->dst);
            break;
        case PHX_CK_REC_JUDGE:
            judge(c, a->epoch, a->flags);
            break;
        case PHX_CK_REC_DECIDE:
            send_decide(c, a->epoch, a->flags);
            break;
        case PHX_CK_REC_ABORT:
            send_abort(c, a->epoch, a->lost, a->buddy);
            break;
        case PHX_CK_REC_ROLLBACK:
            do_rollback(c);
            break;
        case PHX_CK_REC_OWN:
            rc = restore_own(c, k->slot);
            break;
        case PHX_CK_REC_SHIP:
            rc = k->slot->held[a->x] ? cr_bulk_send(c, BK_XFER, a->dst, a->x, (uint64_t)a->round, a->epoch,
                                                    k->slot->held[a->x], k->slot->held_len[a->x])
                                     : PHX_ENOENT;
            break;
        case PHX_CK_REC_HELD:
        case PHX_CK_REC_XFER:
            rc = restore_copy(c, k, a);
            break;
        case PHX_CK_REC_TABLE:
            memcpy(c->loc, k->loc, (size_t)c->nloc * sizeof *c->loc);
            c->n->loc_n = c->nhome;
            c->n->loc = c->loc;   /* routing follows the table from now on */
            break;
        case PHX_CK_REC_DONE:
            cr_ctl(c, a->dst, RB_DONE, (uint64_t)a->round, NULL, 0);
            break;
        case PHX_CK_REC_GO:
            cr_ctl_all(c, RB_GO, (uint64_t)a->round, NULL, 0, 1);
            break;
        case PHX_CK_REC_RESUME:
            end_round(c);
            break;
        }
    }
    if (rc)
        cr_fatal(c, 1, "restoring a checkpoint failed: %s", phx_strerror(rc));
    phx_ck_rec_out_free(o);
}

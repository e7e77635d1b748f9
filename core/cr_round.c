/* recovery=cr: the checkpoint (commit) round's glue: the decisions are the
 * machine's (ft/ckpt/commit.h: BEGIN, markers, snapshot, buddy copy, READY,
 * COMMIT); this file feeds it the control frames and carries out its
 * actions (frames, worker pause, serialisation, the buddy copy, the commit
 * here). Also the disk copy of a committed epoch and the coordinator's idle
 * probes (td=cut). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt_disk.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/cr_int.h"

/* What an action needs from the frame that caused it. */
typedef struct ck_ctx {
    const void *body;            /* BEGIN to send: buddies and table */
    size_t len;
    const phx_ck_begin_t *begin; /* PAUSE: the BEGIN accepted */
    const uint8_t *p;            /* COMMIT: its body (joins) */
    size_t plen;
} ck_ctx_t;

static void act(cr_t *c, const phx_ck_cm_out_t *o, const ck_ctx_t *x);

void cr_begin_checkpoint(cr_t *c)
{
    if (c->phase != PH_IDLE || cr_coord(c) != c->self || atomic_load(&c->n->stopping))
        return;
    uint64_t e = c->store.committed + 1;
    if (c->ck_hold) {   /* taken when the layered mode lets go (phx_cr_hold) */
        if (!c->ck_deferred)
            phx_evlog("ckpt_held", "\"epoch\":%llu", (unsigned long long)e);
        c->ck_deferred = 1;
        return;
    }
    int32_t *b = malloc((size_t)c->size * sizeof *b);
    if (!b) {
        cr_fatal(c, 1, "%s", "out of memory starting a checkpoint");
        return;
    }
    for (int r = 0; r < c->size; r++)
        b[r] = c->dead[r] ? -1 : phx_ck_buddy(c->size, c->ring, c->dead, r);
    /* BEGIN: the buddies, then the table when slices go home. */
    size_t cap = ((size_t)c->size + (size_t)c->nloc) * 4;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        free(b);
        cr_fatal(c, 1, "%s", "out of memory starting a checkpoint");
        return;
    }
    phx_ck_rj_view_t rv = cr_rj_view(c);
    const int *table = phx_ck_rj_home_plan(c->rj.m, &rv, c->loc) ? phx_ck_rj_home_loc(c->rj.m) : NULL;
    /* A drain (cr_drain.c) sends its plan now, before this BEGIN. */
    if (cr_drain_plan(c, phx_ck_id((uint32_t)c->ndead, (uint32_t)e), b, &table) < 0) {
        free(buf);
        free(b);
        return;
    }
    phx_ck_begin_t bm = { .buddy = b, .loc = table };
    long len = phx_ck_begin_enc(&bm, c->size, c->nloc, buf, cap);
    phx_ck_cm_out_t out = { 0 };
    uint64_t id = phx_ck_cm_start(c->cm, e, c->ndead, &out);
    phx_ck_quiet_begin(&c->probe.quiet, id);
    act(c, &out, &(ck_ctx_t){ .body = buf, .len = (size_t)len });
    free(buf);
    free(b);
}

void cr_on_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_begin_t m;
    if (c->phase == PH_CK && cr_drain_defer_begin(c, id, p, len))
        return;   /* the next coordinator's, after a drain not committed here yet */
    if (c->phase != PH_IDLE || phx_ck_begin_dec(p, len, c->size, c->nloc, &m))
        return;   /* a failure is being handled */
    int bad = -1;
    for (size_t i = 0; i < m.table.n && bad < 0; i++) {
        int r = phx_wire_a32_i32(m.table, i);
        if (r < 0 || r >= c->size || c->dead[r])
            bad = r;
    }
    phx_ck_cm_out_t out = { 0 };
    if (phx_ck_cm_on_begin(c->cm, id, c->ndead, bad < 0, &out) < 0)
        PHX_WARN("ckpt", "checkpoint %llu: BEGIN moves a slice to rank %d, not a live rank; ignored",
                 (unsigned long long)phx_ck_id_epoch(id), bad);
    act(c, &out, &(ck_ctx_t){ .begin = &m });
}

/* PAUSE: this node takes part in checkpoint id with the BEGIN's tables. */
static void ck_pause(cr_t *c, uint64_t e, const phx_ck_begin_t *m)
{
    phx_ck_copy_t *slot = phx_ck_store_open(&c->store, e);
    if (!slot) {
        cr_fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
        return;
    }
    for (int r = 0; r < c->size; r++) {
        c->buddy[r] = phx_wire_a32_i32(m->buddies, (size_t)r);
        slot->buddy[r] = c->buddy[r];
    }
    memcpy(slot->loc, c->loc, (size_t)c->nloc * sizeof *c->loc);
    if (m->table.n) {   /* slices go home at this cut: the epoch holds them there */
        phx_ck_rj_home_begin(c->rj.m, m->table, c->loc);
        memcpy(slot->loc, phx_ck_rj_home_loc(c->rj.m), (size_t)c->nloc * sizeof *c->loc);
        c->pr |= 4;
    }
    cr_bulk_drop(c, BK_COPY, BK_TX);   /* an aborted attempt's, whose blob the store may drop */
    c->phase = PH_CK;
    c->ck_epoch = e;
    c->t_begin = phx_now_ns();
    phx_evlog("ckpt_begin", "\"epoch\":%llu", (unsigned long long)e);
    cr_pause_workers(c);
    cr_progress(c);
}

void cr_ck_progress(cr_t *c)
{
    phx_ck_cm_out_t out = { 0 };
    phx_ck_cm_on_progress(c->cm, c->pause.paused, &c->filt, c->dead, &out);
    act(c, &out, NULL);
}

/* SNAPSHOT: every marker is in; the state is serialised and kept here. */
static void ck_snapshot(cr_t *c, uint64_t e)
{
    phx_node_t *n = c->n;
    c->t_marked = phx_now_ns();
    /* The serialisation holds this thread: what is queued for the links
     * (markers, chunk acks) leaves first, or the peers wait for it. */
    phx_net_flush(n->net);
    phx_node_batch_flush(n);
    if (phx_ck_rj_moving(c->rj.m) && !cr_migrate(c))
        return;   /* asked again when the moved slices are in */
    void *blob;
    size_t len;
    int rc = cr_snapshot(c, &blob, &len);
    if (rc) {
        PHX_ERROR("ckpt", "cannot serialise this node's state: %s", phx_strerror(rc));
        phx_node_exit(n, 1, 1);
        return;
    }
    c->ck_bytes = len;
    if ((rc = phx_ck_store_put_own(&c->store, e, blob, len))) {
        free(blob);
        cr_fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
        return;
    }
    int b = c->buddy[c->self];
    if (b < 0)
        c->t_acked = c->t_stored;
    phx_ck_cm_out_t out = { 0 };
    phx_ck_cm_on_snapshot_done(c->cm, b, &out);
    act(c, &out, NULL);
}

/* READY(id) from peer, at the coordinator. */
void cr_on_ready(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    uint64_t queued;
    if (!phx_ck_ready_dec(p, len, &queued))
        phx_ck_quiet_count(&c->probe.quiet, peer, id, queued);
    phx_ck_cm_out_t out = { 0 };
    phx_ck_cm_on_ready(c->cm, peer, id, c->dead, &out);
    act(c, &out, NULL);
}

/* The buddy holds this node's copy of id (its ACK). */
void cr_on_ack(cr_t *c, uint64_t id)
{
    if (phx_ck_cm_on_copy_stored(c->cm, id)) {
        c->t_acked = phx_now_ns();
        cr_progress(c);
    }
}

/* Coordinator: every live rank holds both copies of the checkpoint. If no
 * rank had a message queued at its cut, the job is over: commit it (so a
 * failure from here rolls back to a finished state, which ends again at
 * once) and end the job everywhere, as phx_exit does. */
static void on_all_ready(cr_t *c, uint64_t id)
{
    int probe = c->probe.on;
    c->probe.on = 0;
    int done = c->probe.cut && phx_ck_quiet_decide(&c->probe.quiet, id, c->dead, probe, phx_now_ns() / 1000000);
    /* Message logging recovered a lost rank without its respawn (see mig):
     * the newcomer is taken in here, hosting nothing in this epoch. */
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, phx_ck_id_epoch(id));
    if (c->partial_ok && slot && !done && cr_joins_ready(c)) {
        cr_ctl_eset(c, CK_COMMIT, id, phx_ck_id_epoch(id), 0, 1, slot->loc, slot->buddy);
        return;
    }
    if (cr_die_mid_commit(c, id))
        return;
    cr_ctl_all(c, CK_COMMIT, id, NULL, 0, 1);
    if (done && !atomic_load(&c->n->stopping)) {
        PHX_INFO("td", "cut: global termination detected at epoch %llu", (unsigned long long)phx_ck_id_epoch(id));
        phx_evlog("td_declare", "\"td\":\"cut\",\"epoch\":%llu", (unsigned long long)phx_ck_id_epoch(id));
        phx_node_exit(c->n, c->n->exit_code, 1);
    }
}

/* SEND: one of the round's frames. */
static void ck_send(cr_t *c, const phx_ck_cm_act_t *a, const ck_ctx_t *x)
{
    int tag = 0;
    const void *body = NULL;
    size_t len = 0;
    uint8_t q[PHX_CK_READY_LEN];
    switch (a->msg) {
    case PHX_CK_CM_M_BEGIN:
        tag = CK_BEGIN;
        body = x->body;
        len = x->len;
        break;
    case PHX_CK_CM_M_MARK:
        tag = CK_MARK;
        break;
    case PHX_CK_CM_M_READY:
        tag = CK_READY;
        phx_ck_ready_enc(q, c->probe.queued);
        body = q;
        len = sizeof q;
        break;
    case PHX_CK_CM_M_COMMIT:   /* the decision: its body and the end of the job are the glue's */
        on_all_ready(c, a->id);
        return;
    }
    if (a->dst == PHX_CK_CM_ALL)
        cr_ctl_all(c, tag, a->id, body, len, a->self);
    else
        cr_ctl(c, a->dst == PHX_CK_CM_COORD ? cr_coord(c) : a->dst, tag, a->id, body, len);
}

/* STORED: own copy kept, buddy copy on its way. */
static void ck_stored(cr_t *c, uint64_t e)
{
    c->t_stored = phx_now_ns();
    /* ms since BEGIN: workers paused, every marker in, state serialised */
    phx_evlog("ckpt_stored", "\"epoch\":%llu,\"bytes\":%zu,\"paused\":%.3f,\"marked\":%.3f,\"ms\":%.3f,"
              "\"queued\":%llu",
              (unsigned long long)e, c->ck_bytes, (double)(c->t_paused - c->t_begin) / 1e6,
              (double)(c->t_marked - c->t_begin) / 1e6, (double)(c->t_stored - c->t_begin) / 1e6,
              (unsigned long long)c->probe.queued);
    if (c->die_point == DIE_STORED && c->die_epoch == e)
        raise(SIGKILL);   /* test: between the local store and the commit */
    if (c->die_point == DIE_DRAIN && cr_drain_planned(c, phx_ck_cm_id(c->cm)))
        raise(SIGKILL);   /* test: a failure racing a drain (EPOCH unused) */
}

static void ck_commit(cr_t *c, uint64_t e, const uint8_t *p, size_t len);

static void act(cr_t *c, const phx_ck_cm_out_t *o, const ck_ctx_t *x)
{
    for (int i = 0; i < o->n; i++) {
        const phx_ck_cm_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_CM_SEND:
            ck_send(c, a, x);
            break;
        case PHX_CK_CM_PAUSE:
            ck_pause(c, a->epoch, x->begin);
            break;
        case PHX_CK_CM_CUT:
            c->t_paused = phx_now_ns();
            /* Everything the paused workers sent goes onto the links before
             * the marker. */
            phx_node_drain_outbox(c->n);
            break;
        case PHX_CK_CM_SNAPSHOT:
            ck_snapshot(c, a->epoch);
            break;
        case PHX_CK_CM_SHIP: {
            phx_ck_copy_t *slot = phx_ck_store_get(&c->store, a->epoch);
            if (!slot || cr_bulk_send(c, BK_COPY, a->dst, c->self, a->id, a->epoch, slot->own, slot->own_len)) {
                cr_fatal(c, 1, "%s", "out of memory sending the buddy copy");
                return;
            }
            break;
        }
        case PHX_CK_CM_STORED:
            ck_stored(c, a->epoch);
            break;
        case PHX_CK_CM_COMMIT:
            ck_commit(c, a->epoch, x ? x->p : NULL, x ? x->plen : 0);
            break;
        case PHX_CK_CM_ABORT:   /* cr_on_failure starts the recovery round */
            break;
        }
    }
}

/* A failure notice: the round in progress ends here, then the recovery
 * round takes over (cr_on_failure). */
int cr_ck_failure(void *st, int rank)
{
    cr_t *c = st;
    int fresh = rank >= 0 && rank < c->size && !c->dead[rank];
    if (fresh) {
        phx_ck_cm_out_t out = { 0 };
        phx_ck_cm_on_failure(c->cm, rank, &out);
        act(c, &out, NULL);
    }
    int rc = cr_on_failure(st, rank);
    if (fresh)
        cr_drain_failure(c, rank);   /* the plan goes; a leaver asks its new coordinator */
    return rc;
}

/* Coordinator: a probe when every live rank last said it was idle. */
void cr_maybe_probe(cr_t *c)
{
    if (!c->probe.cut || c->phase != PH_IDLE || cr_coord(c) != c->self ||
        !phx_ck_quiet_want(&c->probe.quiet, c->dead, phx_now_ns() / 1000000))
        return;
    cr_begin_checkpoint(c);
    c->probe.on = c->phase == PH_CK;
}

/* Every hb-period: this node's idleness (no message queued or running),
 * sent to the coordinator when it changed. Sampled, so a report may be
 * stale; the probe's cut decides, the reports only say when to look. */
void cr_on_idle_timer(uv_timer_t *t)
{
    cr_t *c = t->data;
    if (c->phase != PH_IDLE || phx_ck_rj_joining(c->rj.m) || atomic_load(&c->n->stopping))
        return;
    int idle = atomic_load(&c->n->work) == 0 && c->n->batch_pending == 0;
    int k = cr_coord(c);
    if (idle != c->probe.idle_sent && k >= 0) {
        c->probe.idle_sent = idle;
        cr_ctl(c, k, CK_IDLE, (uint64_t)idle, NULL, 0);
    }
    cr_maybe_probe(c);   /* the coordinator: a gap may have passed since the last report */
}

/* With ckpt-dir: this node's file of committed epoch e. */
void cr_write_disk(cr_t *c, uint64_t e)
{
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    if (!c->disk.dir || !slot || !slot->own)
        return;
    int rc = phx_ckd_write_rank(c->disk.dir, c->disk.tag, e, c->self, slot->own, slot->own_len);
    if (rc)
        PHX_ERROR("ckpt", "disk checkpoint of epoch %llu not written: %s", (unsigned long long)e, phx_strerror(rc));
    else
        cr_ctl(c, cr_coord(c), CK_DISK, e, NULL, 0);
}

void cr_on_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    if (phx_ck_rj_joining(c->rj.m)) {
        cr_join_at_commit(c, id, p, len);
        return;
    }
    phx_ck_cm_out_t out = { 0 };
    phx_ck_cm_on_commit(c->cm, id, &out);
    act(c, &out, &(ck_ctx_t){ .p = p, .plen = len });
}

/* COMMIT: epoch e is committed here (p, len: the COMMIT's body). */
static void ck_commit(cr_t *c, uint64_t e, const uint8_t *p, size_t len)
{
    phx_ck_store_commit(&c->store, e);
    /* A rank taken in at the last commit may coordinate from here on. */
    phx_ck_rj_committed(c->rj.m);
    phx_ck_eset_t m;
    int joins = len && !phx_ck_eset_dec(p, len, c->size, c->nloc, &m) && m.joins;
    int rc = joins ? cr_take_in(c, &m) : 0;
    if (rc) {
        cr_fatal(c, 1, "taking a rank back in failed: %s", phx_strerror(rc));
        return;
    }
    if (phx_ck_rj_moving(c->rj.m)) {
        cr_bulk_drop(c, BK_MIG, BK_TX | BK_RX);
        cr_mig_reset(c);
        phx_evlog("home", "\"epoch\":%llu", (unsigned long long)e);
    }
    double ms = (double)(phx_now_ns() - c->t_begin) / 1e6;
    phx_metrics_add(PHX_M_CKPT_COUNT, 1);
    phx_metrics_add(PHX_M_CKPT_BYTES, c->ck_bytes);
    phx_metrics_set(PHX_M_CKPT_LAST_NS, phx_now_ns() - c->t_begin);
    phx_metrics_observe(PHX_H_CKPT_COMMIT, phx_now_ns() - c->t_begin);
    phx_metrics_set(PHX_M_EPOCH, e);
    phx_evlog("ckpt_commit", "\"epoch\":%llu,\"bytes\":%zu,\"ms\":%.3f,\"copied\":%.3f",
              (unsigned long long)e, c->ck_bytes, ms, (double)(c->t_acked - c->t_begin) / 1e6);
    PHX_INFO("ckpt", "epoch %llu committed (%zu bytes here, %.1f ms)", (unsigned long long)e, c->ck_bytes, ms);
    c->phase = PH_IDLE;
    c->pr = 0;
    if (cr_drain_commit(c, phx_ck_cm_id(c->cm)))
        return;   /* this node drained and is leaving */
    if (c->lis)
        c->lis(c->lis_arg, PHX_CR_COMMIT, e);
    if (c->lis && joins)
        c->lis(c->lis_arg, PHX_CR_JOINED, e);
    cr_resume_workers(c);
    cr_write_disk(c, e);
    if (joins)
        cr_begin_checkpoint(c);   /* the newcomers' slices go home at once (home_table) */
    cr_drain_idle(c);   /* a drain asked for during this checkpoint starts now */
}

/* Coordinator: every live rank wrote its file of e: the manifest makes the
 * epoch usable, and epochs before e-1 go. */
void cr_on_disk_ok(cr_t *c, int peer, uint64_t e)
{
    if (!c->disk.dir || e != c->disk.epoch)
        return;
    c->disk.ok[peer] = 1;
    int nfiles = 0;
    for (int r = 0; r < c->size; r++) {
        if (c->dead[r])
            continue;
        if (!c->disk.ok[r])
            return;
        nfiles++;
    }
    phx_ck_copy_t *slot = phx_ck_store_get(&c->store, e);
    int *ranks = malloc((size_t)nfiles * sizeof *ranks);
    if (!slot || !ranks) {
        free(ranks);
        PHX_ERROR("ckpt", "manifest of epoch %llu not written", (unsigned long long)e);
        return;
    }
    nfiles = 0;
    for (int r = 0; r < c->size; r++)
        if (!c->dead[r])
            ranks[nfiles++] = r;
    phx_ckd_manifest_t m = { .epoch = e, .size = c->size, .nhome = c->nhome, .slices = PHX_LOC_SLICES, .loc = slot->loc,
                             .nfiles = nfiles, .ranks = ranks };
    int rc = phx_ckd_write_manifest(c->disk.dir, c->disk.tag, &m);
    free(ranks);
    c->disk.epoch = 0;
    if (rc) {
        PHX_ERROR("ckpt", "manifest of epoch %llu not written: %s", (unsigned long long)e, phx_strerror(rc));
        return;
    }
    phx_evlog("ckpt_disk", "\"epoch\":%llu", (unsigned long long)e);
    if (e > 1)
        phx_ckd_prune(c->disk.dir, e - 1);
}

/* ---- recovery -------------------------------------------------------------- */


/* recovery=cr: the checkpoint (commit) round: BEGIN, markers, snapshot,
 * buddy copy, READY, COMMIT; the disk copy of a committed epoch; the
 * coordinator's idle probes (td=cut). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/ckpt_disk.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/cr_int.h"

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
    uint64_t id = phx_ck_id((uint32_t)c->ndead, (uint32_t)e);
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
    phx_ck_begin_t bm = { .buddy = b, .loc = cr_home_table(c, c->home.loc) ? c->home.loc : NULL };
    long len = phx_ck_begin_enc(&bm, c->size, c->nloc, buf, cap);
    phx_ck_commit_begin(&c->commit, e);
    c->commit_id = id;
    phx_ck_quiet_begin(&c->probe.quiet, id);
    cr_ctl_all(c, CK_BEGIN, id, buf, (size_t)len, 1);
    free(buf);
    free(b);
}

void cr_on_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_begin_t m;
    if (c->phase != PH_IDLE || (int)phx_ck_id_round(id) != c->ndead || phx_ck_begin_dec(p, len, c->size, c->nloc, &m))
        return;   /* a failure is being handled, or a stale round */
    for (size_t i = 0; i < m.table.n; i++) {
        int r = phx_wire_a32_i32(m.table, i);
        if (r < 0 || r >= c->size || c->dead[r]) {
            PHX_WARN("ckpt", "checkpoint %llu: BEGIN moves a slice to rank %d, not a live rank; ignored",
                     (unsigned long long)phx_ck_id_epoch(id), r);
            return;
        }
    }
    uint64_t e = phx_ck_id_epoch(id);
    phx_ck_copy_t *slot = phx_ck_store_open(&c->store, e);
    if (!slot) {
        cr_fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
        return;
    }
    for (int r = 0; r < c->size; r++) {
        c->buddy[r] = phx_wire_a32_i32(m.buddies, (size_t)r);
        slot->buddy[r] = c->buddy[r];
    }
    memcpy(slot->loc, c->loc, (size_t)c->nloc * sizeof *c->loc);
    if (m.table.n) {   /* slices go home at this cut: the epoch holds them there */
        for (int i = 0; i < c->nloc; i++)
            c->home.loc[i] = phx_wire_a32_i32(m.table, (size_t)i);
        memcpy(c->home.from, c->loc, (size_t)c->nloc * sizeof *c->loc);
        memcpy(slot->loc, c->home.loc, (size_t)c->nloc * sizeof *c->loc);
        memset(c->home.in_done, 0, (size_t)c->size);
        c->home.mig = 1;
        c->pr |= 4;
    }
    cr_bulk_drop(c, BK_COPY, BK_TX);   /* an aborted attempt's, whose blob the store may drop */
    c->phase = PH_CK;
    c->ck_id = id;
    c->ck_epoch = e;
    c->marks_sent = c->snapped = c->acked = c->ready_sent = 0;
    c->t_begin = phx_now_ns();
    phx_evlog("ckpt_begin", "\"epoch\":%llu", (unsigned long long)e);
    cr_pause_workers(c);
    cr_progress(c);
}

void cr_ck_progress(cr_t *c)
{
    phx_node_t *n = c->n;
    if (!c->pause.paused)
        return;
    if (!c->marks_sent) {
        c->t_paused = phx_now_ns();
        /* Everything the paused workers sent goes onto the links before
         * the marker. */
        phx_node_drain_outbox(n);
        cr_ctl_all(c, CK_MARK, c->ck_id, NULL, 0, 0);
        c->marks_sent = 1;
    }
    if (!c->snapped && phx_ck_filter_marked(&c->filt, c->self, c->ck_id, c->dead)) {
        c->t_marked = phx_now_ns();
        /* The serialisation holds this thread: what is queued for the links
         * (markers, chunk acks) leaves first, or the peers wait for it. */
        phx_net_flush(n->net);
        phx_node_batch_flush(n);
        if (c->home.mig && !cr_migrate(c))
            return;
        void *blob;
        size_t len;
        int rc = cr_snapshot(c, &blob, &len);
        if (rc) {
            PHX_ERROR("ckpt", "cannot serialise this node's state: %s", phx_strerror(rc));
            phx_node_exit(n, 1, 1);
            return;
        }
        c->ck_bytes = len;
        c->snapped = 1;
        if ((rc = phx_ck_store_put_own(&c->store, c->ck_epoch, blob, len))) {
            free(blob);
            cr_fatal(c, 1, "%s", "checkpoint slot busy (internal error)");
            return;
        }
        int b = c->buddy[c->self];
        if (b < 0) {
            c->acked = 1;   /* a job of one node has no second copy */
            c->t_acked = c->t_stored;
        }
        else if ((rc = cr_bulk_send(c, BK_COPY, b, c->self, c->ck_id, c->ck_epoch, blob, len))) {
            cr_fatal(c, 1, "%s", "out of memory sending the buddy copy");
            return;
        }
        c->t_stored = phx_now_ns();
        /* ms since BEGIN: workers paused, every marker in, state serialised */
        phx_evlog("ckpt_stored", "\"epoch\":%llu,\"bytes\":%zu,\"paused\":%.3f,\"marked\":%.3f,\"ms\":%.3f,"
                  "\"queued\":%llu",
                  (unsigned long long)c->ck_epoch, len, (double)(c->t_paused - c->t_begin) / 1e6,
                  (double)(c->t_marked - c->t_begin) / 1e6, (double)(c->t_stored - c->t_begin) / 1e6,
                  (unsigned long long)c->probe.queued);
        if (c->die_point == DIE_STORED && c->die_epoch == c->ck_epoch)
            raise(SIGKILL);   /* test: between the local store and the commit */
    }
    if (c->acked && !c->ready_sent) {
        c->ready_sent = 1;
        uint8_t q[PHX_CK_READY_LEN];
        phx_ck_ready_enc(q, c->probe.queued);
        cr_ctl(c, cr_coord(c), CK_READY, c->ck_id, q, sizeof q);
    }
}

/* Coordinator: every live rank holds both copies of the checkpoint. If no
 * rank had a message queued at its cut, the job is over: commit it (so a
 * failure from here rolls back to a finished state, which ends again at
 * once) and end the job everywhere, as phx_exit does. */
void cr_on_all_ready(cr_t *c, uint64_t id)
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
    if (c->phase != PH_IDLE || c->rj.joining || atomic_load(&c->n->stopping))
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
    if (c->rj.joining) {
        cr_join_at_commit(c, id, p, len);
        return;
    }
    if (c->phase != PH_CK || id != c->ck_id)
        return;
    phx_ck_store_commit(&c->store, c->ck_epoch);
    /* A rank taken in at the last commit may coordinate from here on. */
    memset(c->fresh, 0, (size_t)c->size);
    phx_ck_eset_t m;
    int joins = len && !phx_ck_eset_dec(p, len, c->size, c->nloc, &m) && m.joins;
    int rc = joins ? cr_take_in(c, &m) : 0;
    if (rc) {
        cr_fatal(c, 1, "taking a rank back in failed: %s", phx_strerror(rc));
        return;
    }
    if (c->home.mig) {
        cr_bulk_drop(c, BK_MIG, BK_TX | BK_RX);
        cr_mig_reset(c);
        phx_evlog("home", "\"epoch\":%llu", (unsigned long long)c->ck_epoch);
    }
    double ms = (double)(phx_now_ns() - c->t_begin) / 1e6;
    phx_metrics_add(PHX_M_CKPT_COUNT, 1);
    phx_metrics_add(PHX_M_CKPT_BYTES, c->ck_bytes);
    phx_metrics_set(PHX_M_CKPT_LAST_NS, phx_now_ns() - c->t_begin);
    phx_metrics_observe(PHX_H_CKPT_COMMIT, phx_now_ns() - c->t_begin);
    phx_metrics_set(PHX_M_EPOCH, c->ck_epoch);
    phx_evlog("ckpt_commit", "\"epoch\":%llu,\"bytes\":%zu,\"ms\":%.3f,\"copied\":%.3f",
              (unsigned long long)c->ck_epoch, c->ck_bytes, ms, (double)(c->t_acked - c->t_begin) / 1e6);
    PHX_INFO("ckpt", "epoch %llu committed (%zu bytes here, %.1f ms)", (unsigned long long)c->ck_epoch,
             c->ck_bytes, ms);
    c->phase = PH_IDLE;
    c->pr = 0;
    if (c->lis)
        c->lis(c->lis_arg, PHX_CR_COMMIT, c->ck_epoch);
    if (c->lis && joins)
        c->lis(c->lis_arg, PHX_CR_JOINED, c->ck_epoch);
    cr_resume_workers(c);
    cr_write_disk(c, c->ck_epoch);
    if (joins)
        cr_begin_checkpoint(c);   /* the newcomers' slices go home at once (home_table) */
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


/* recovery=cr, restart-on=respawn: a lost rank's new incarnation is
 * reported, taken in by a round or at a commit, and restored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ft.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/cr_int.h"

/* A newcomer taken in (restart-on=respawn): its state is the copy its
 * buddy ships; it keeps that copy as its own of the epoch, so it can roll
 * back again before the next checkpoint. */
void cr_rejoin_restore(cr_t *c)
{
    int self = c->self, hosts = 0;
    for (int i = 0; i < c->nloc; i++)
        hosts |= c->rj.loc[i] == self;
    if (hosts && (!c->xfer.blob[self] || c->xfer.epoch[self] != cr_rb_epoch(c)))
        return;   /* the buddy's copy is on its way */
    size_t len = c->xfer.len[self];
    void *blob = hosts ? c->xfer.blob[self] : cr_empty_blob(c, cr_rb_epoch(c), &len);
    if (!blob)
        return;
    if (cr_adopt_epoch(c, cr_rb_epoch(c), blob, len)) {
        if (!hosts)
            free(blob);
        return;
    }
    if (hosts)
        c->xfer.blob[self] = NULL;   /* the store owns it */
    cr_discard_all(c, 0);
    cr_ctl_all(c, RB_MARK, (uint64_t)c->ndead, NULL, 0, 0);
    c->filt.round = (uint64_t)c->ndead;
    uint32_t nt = 0;
    int rc = cr_restore_blob(c, blob, len, 1, c->loc, &nt);
    if (rc) {
        cr_fatal(c, 1, "restoring the rejoined rank's checkpoint failed: %s", phx_strerror(rc));
        return;
    }
    phx_evlog("rollback", "\"epoch\":%llu,\"round\":%d", (unsigned long long)cr_rb_epoch(c), c->ndead);
    phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d,\"via\":%d", nt, self, self,
              c->rj.buddy[self]);
    phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    cr_rb_restored(c);
}

/* Whether some lost rank's newcomer is connected to every live rank. */
int cr_joins_ready(const cr_t *c)
{
    uint32_t inc;
    for (int x = 0; c->rj.respawn && x < c->size; x++)
        if (c->dead[x] && phx_ck_join_ready(&c->rj.join, x, c->dead, &inc))
            return 1;
    return 0;
}

/* Reports a newcomer connected here to the coordinator (again after the
 * coordinator changed). */
void cr_rj_report(cr_t *c, int x)
{
    uint8_t b[PHX_CK_JOIN_LEN];
    phx_ck_join_enc(b, c->rj.inc[x]);
    cr_ctl(c, cr_coord(c), RB_JOIN, (uint64_t)x, b, sizeof b);
}

void cr_on_peer_up(void *st, int peer, uint32_t inc)
{
    cr_t *c = st;
    if (!c->rj.respawn || c->rj.joining || peer < 0 || peer >= c->size || !c->dead[peer])
        return;
    PHX_INFO("ckpt", "rank %d is back (incarnation %u)", peer, inc);
    phx_evlog("peer_back", "\"peer\":%d,\"inc\":%u", peer, inc);
    c->rj.inc[peer] = inc;
    cr_rj_report(c, peer);
}

/* A round of restart-on=respawn must end within startup-timeout of the
 * last failure (a newcomer: within twice that of its start). Past it the
 * lost rank is not coming back, or the round cannot complete (the newcomer
 * died before it was taken in, or a survivor during the round): every node
 * ends the job on its own timer with exit 78, never a hang. */
void cr_on_rj_timer(uv_timer_t *t)
{
    cr_t *c = t->data;
    int ms = c->n->cfg.startup_timeout_ms, x = 0;
    if (c->rj.joining) {
        /* Checked every hb-timeout: the job may have ended without this
         * incarnation (an abort, or its partial round needed no respawn):
         * no peer is connected and one that was has closed its listener. */
        int up = 0, gone = 0;
        for (int r = 0; r < c->size; r++) {
            up |= r != c->self && phx_net_peer_up(c->n->net, r);
            gone |= r != c->self && phx_net_peer_gone(c->n->net, r);
        }
        if (!up && gone)
            fprintf(stderr, "phalanx: recovery=cr: rank %d (incarnation %u): the job's other ranks are gone; it "
                            "ended before this incarnation was taken back in\n", c->self, c->n->inc);
        else if (phx_now_ns() - c->t_fail >= 2 * (uint64_t)ms * 1000000)
            fprintf(stderr, "phalanx: recovery=cr: rank %d (incarnation %u) was not taken back into the job within "
                            "%d ms; giving up\n", c->self, c->n->inc, 2 * ms);
        else
            return;
        uv_timer_stop(t);
        phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 1);
        return;
    }
    if (c->phase != PH_REC)
        return;
    while (x < c->size && !(c->dead[x] && !c->rj.inc[x]))
        x++;
    if (x < c->size)
        fprintf(stderr, "phalanx: recovery=cr: rank %d did not come back within %d ms (restart-on=respawn needs it "
                        "restarted: by phx run, or a container restart policy); the job cannot be recovered\n", x, ms);
    else
        fprintf(stderr, "phalanx: recovery=cr: the recovery round taking lost ranks back in did not complete "
                        "within %d ms; the job cannot be recovered\n", ms);
    phx_evlog("ckpt_lost", "\"rank\":%d,\"respawn\":0", x < c->size ? x : -1);
    phx_node_exit(c->n, PHX_EXIT_CKPT_LOST, 0);
}

void cr_on_join(cr_t *c, int peer, uint64_t x, const uint8_t *p, size_t len)
{
    uint32_t inc;
    if (!phx_ck_join_dec(p, len, &inc) && x < (uint64_t)c->size && cr_coord(c) == c->self &&
        phx_ck_join_seen(&c->rj.join, peer, (int)x, inc)) {
        cr_rb_try_decide(c);
        if (c->partial_ok && c->phase == PH_IDLE && cr_joins_ready(c))
            cr_begin_checkpoint(c);   /* taken in at its commit (on_all_ready) */
    }
}

/* Takes the newcomers of a DECIDE in: members again, with a new detector
 * view (their old incarnations stay dead: the transport refuses them). */
int cr_take_in(cr_t *c, const phx_ck_eset_t *m)
{
    c->rj.view = m->view;
    for (int x = 0; x < c->size; x++) {
        uint32_t inc = c->rj.taken[x] = phx_wire_a32_u32(m->inc, (size_t)x);
        if (!inc)
            continue;
        c->dead[x] = 0;
        c->fresh[x] = 1;
        c->rj.inc[x] = 0;
        phx_ck_join_clear(&c->rj.join, x);
        phx_evlog("rejoin", "\"rank\":%d,\"inc\":%u,\"view\":%u", x, inc, (unsigned)c->rj.view);
    }
    for (int i = 0; i < c->nloc; i++)
        c->rj.loc[i] = phx_wire_a32_i32(m->table, (size_t)i);
    for (int r = 0; r < c->size; r++)
        c->rj.buddy[r] = phx_wire_a32_i32(m->buddies, (size_t)r);
    for (int r = 0; c->rj.joining && r < c->size; r++)
        if (c->dead[r])
            phx_net_close_peer(c->n->net, r, "dead before this rank rejoined");
    /* A newcomer has no detector yet: another rank lost meanwhile is still
     * alive to its transport, which would refuse that rank's newcomer for
     * good (and drop what is sent to a rank it closed). */
    for (int x = 0; x < c->size; x++)
        if (x != c->self && c->rj.taken[x])
            phx_net_take_inc(c->n->net, x, c->rj.taken[x]);
    if (c->rj.joining)
        phx_net_rejoined(c->n->net);
    return phx_ft_new_view(c->n, c->rj.view, c->dead, c->rj.taken);
}

/* This newcomer is taken in at the commit of epoch id (on_all_ready): a
 * member from here, hosting nothing, its copy of the epoch its empty
 * state. Its predecessor's tasks run on the helpers that replayed them
 * until the next checkpoint moves them here (home_table). */
void cr_join_at_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_node_t *n = c->n;
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m) || !m.joins ||
        phx_wire_a32_u32(m.inc, (size_t)c->self) != n->inc)
        return;
    uint64_t e = phx_ck_id_epoch(id);
    c->ndead = (int)phx_ck_id_round(id);
    memcpy(c->dead, m.dead, (size_t)c->size);
    int rc = cr_take_in(c, &m);
    if (rc) {
        cr_fatal(c, 1, "taking this rank back in failed: %s", phx_strerror(rc));
        return;
    }
    size_t bl = 0;
    void *blob = cr_empty_blob(c, e, &bl);
    if (!blob)
        return;
    if (cr_adopt_epoch(c, e, blob, bl)) {
        free(blob);
        return;
    }
    memcpy(c->buddy, c->rj.buddy, (size_t)c->size * sizeof *c->buddy);
    c->rj.joining = 0;
    c->phase = PH_IDLE;
    phx_ck_rec_reset(c->rec);
    c->probe.idle_sent = -1;
    uv_timer_stop(&c->rj.timer);
    PHX_INFO("ckpt", "taken back in at epoch %llu; this rank's tasks come home at the next checkpoint",
             (unsigned long long)e);
    if (c->lis)
        c->lis(c->lis_arg, PHX_CR_JOINED, e);
    cr_resume_workers(c);
    cr_write_disk(c, e);
}


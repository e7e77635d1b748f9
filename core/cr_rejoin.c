/* recovery=cr, restart-on=respawn: a lost rank's new incarnation is
 * reported, taken in by a round or at a commit, and restored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ft.h"
#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/cr_int.h"

/* The rejoin machine's view of this node. */
phx_ck_rj_view_t cr_rj_view(const cr_t *c)
{
    return (phx_ck_rj_view_t){ .dead = c->dead, .coord = cr_coord(c), .idle = c->phase == PH_IDLE,
                               .at_commit = c->partial_ok };
}

/* What the newcomer's restore actions carry from ADOPT to RESTORE. */
typedef struct rj_ctx {
    void *blob;
    size_t len;
} rj_ctx_t;

/* ADOPT: this newcomer keeps its state (its buddy's copy, or an empty
 * one) as its own copy of the epoch, under the tables it was taken in with. */
static int rj_adopt(cr_t *c, const phx_ck_rj_act_t *a, rj_ctx_t *k)
{
    int self = c->self, copy = a->flags == PHX_CK_RJ_COPY;
    k->len = c->xfer.len[self];
    k->blob = copy ? c->xfer.blob[self] : cr_empty_blob(c, a->epoch, &k->len);
    if (!k->blob)
        return PHX_ENOENT;   /* the job ends (cr_empty_blob said why) */
    if (cr_adopt_epoch(c, a->epoch, k->blob, k->len)) {
        if (!copy)
            free(k->blob);
        return PHX_EINVAL;
    }
    if (copy)
        c->xfer.blob[self] = NULL;   /* the store owns it */
    return 0;
}

/* RESTORE: the newcomer's state, restored (then DONE). */
static int rj_restore(cr_t *c, const phx_ck_rj_act_t *a, const rj_ctx_t *k)
{
    uint32_t nt = 0;
    int rc = k->blob ? cr_restore_blob(c, k->blob, k->len, 1, c->loc, &nt) : PHX_ENOENT;
    if (rc) {
        cr_fatal(c, 1, "restoring the rejoined rank's checkpoint failed: %s", phx_strerror(rc));
        return rc;
    }
    phx_evlog("rollback", "\"epoch\":%llu,\"round\":%d", (unsigned long long)a->epoch, c->ndead);
    phx_evlog("restore", "\"tasks\":%u,\"source\":\"buddy\",\"of\":%d,\"host\":%d,\"via\":%d", nt, c->self, c->self,
              phx_ck_rj_buddy(c->rj.m)[c->self]);
    phx_metrics_add(PHX_M_TASKS_RESTORED, nt);
    cr_rb_restored(c);
    return 0;
}

/* VIEW: the take-in's ranks are members: a new detector view (their old
 * incarnations stay dead: the transport refuses them). */
static int rj_view(cr_t *c, uint16_t view)
{
    const uint32_t *taken = phx_ck_rj_taken(c->rj.m);
    int joining = phx_ck_rj_joining(c->rj.m);
    for (int r = 0; joining && r < c->size; r++)
        if (c->dead[r])
            phx_net_close_peer(c->n->net, r, "dead before this rank rejoined");
    if (joining)
        phx_net_rejoined(c->n->net);
    return phx_ft_new_view(c->n, view, c->dead, taken);
}

/* JOINED: this newcomer was taken in at the commit of epoch e: a member
 * from here, hosting nothing, its copy of the epoch its empty state. Its
 * predecessor's tasks run on the helpers that replayed them until the next
 * checkpoint moves them here (phx_ck_rj_home_plan). */
static void rj_joined(cr_t *c, uint64_t e)
{
    memcpy(c->buddy, phx_ck_rj_buddy(c->rj.m), (size_t)c->size * sizeof *c->buddy);
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

/* Carries out the machine's actions in order, stopping at the first that
 * fails (each says why and ends the job, but VIEW, whose caller does), and
 * frees o. Returns that failure's code. The move home's actions are
 * cr_migrate's. */
static int run(cr_t *c, phx_ck_rj_out_t *o)
{
    rj_ctx_t k = { 0 };
    int rc = 0;
    if (o->err) {
        cr_fatal(c, 1, "%s", "out of memory in the rejoin protocol");
        o->len = 0;
        rc = o->err;
    }
    for (int i = 0; i < o->len && !rc; i++) {
        const phx_ck_rj_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_RJ_REPORT: {
            uint8_t b[PHX_CK_JOIN_LEN];
            phx_ck_join_enc(b, a->inc);
            cr_ctl(c, a->dst, RB_JOIN, (uint64_t)a->x, b, sizeof b);
            break;
        }
        case PHX_CK_RJ_TRY_DECIDE:
            cr_rb_try_decide(c);
            break;
        case PHX_CK_RJ_CHECKPOINT:
            cr_begin_checkpoint(c);   /* taken in at its commit (on_all_ready) */
            break;
        case PHX_CK_RJ_TAKE_IN:
            c->dead[a->x] = 0;
            phx_evlog("rejoin", "\"rank\":%d,\"inc\":%u,\"view\":%u", a->x, a->inc,
                      (unsigned)phx_ck_rj_view_of(c->rj.m));
            /* A newcomer has no detector yet: another rank lost meanwhile is
             * still alive to its transport, which would refuse that rank's
             * newcomer for good (and drop what is sent to a rank it closed). */
            if (a->x != c->self)
                phx_net_take_inc(c->n->net, a->x, a->inc);
            break;
        case PHX_CK_RJ_VIEW:
            rc = rj_view(c, (uint16_t)a->round);
            break;
        case PHX_CK_RJ_ADOPT:
            rc = rj_adopt(c, a, &k);
            break;
        case PHX_CK_RJ_MARK:
            cr_discard_all(c, 0);
            cr_ctl_all(c, RB_MARK, (uint64_t)a->round, NULL, 0, 0);
            c->filt.round = (uint64_t)a->round;
            break;
        case PHX_CK_RJ_RESTORE:
            rc = rj_restore(c, a, &k);
            break;
        case PHX_CK_RJ_JOINED:
            rj_joined(c, a->epoch);
            break;
        default:   /* the move home: cr_migrate */
            break;
        }
    }
    phx_ck_rj_out_free(o);
    return rc;
}

/* A newcomer taken in (restart-on=respawn), at the decided round's
 * ROLLBACK and again as copies arrive: its state is the copy its buddy
 * ships; it keeps that copy as its own of the epoch, so it can roll back
 * again before the next checkpoint. */
void cr_rejoin_restore(cr_t *c)
{
    int self = c->self;
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_restore(c->rj.m, c->ndead, cr_rb_epoch(c),
                      c->xfer.blob[self] && c->xfer.epoch[self] == cr_rb_epoch(c), &o);
    run(c, &o);
}

/* Whether some lost rank's newcomer is connected to every live rank. */
int cr_joins_ready(const cr_t *c)
{
    return phx_ck_rj_ready(c->rj.m, c->dead);
}

void cr_on_peer_up(void *st, int peer, uint32_t inc)
{
    cr_t *c = st;
    phx_ck_rj_view_t v = cr_rj_view(c);
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_on_peer_up(c->rj.m, &v, peer, inc, &o);
    if (o.len) {
        PHX_INFO("ckpt", "rank %d is back (incarnation %u)", peer, inc);
        phx_evlog("peer_back", "\"peer\":%d,\"inc\":%u", peer, inc);
    }
    run(c, &o);
}

/* rank was declared dead (c->dead has it): its newcomer is gone too, the
 * others are reported again (the coordinator may have changed), and the
 * round must end within startup-timeout. */
void cr_rj_failure(cr_t *c, int rank)
{
    if (!phx_ck_rj_respawn(c->rj.m))
        return;
    uv_timer_start(&c->rj.timer, cr_on_rj_timer, (uint64_t)c->n->cfg.startup_timeout_ms, 0);
    phx_ck_rj_view_t v = cr_rj_view(c);
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_on_failure(c->rj.m, &v, rank, &o);
    run(c, &o);
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
    if (phx_ck_rj_joining(c->rj.m)) {
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
    while (x < c->size && !(c->dead[x] && !phx_ck_rj_connected(c->rj.m, x)))
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
    if (phx_ck_join_dec(p, len, &inc) || x >= (uint64_t)c->size)
        return;
    phx_ck_rj_view_t v = cr_rj_view(c);
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_on_join(c->rj.m, &v, peer, (int)x, inc, &o);
    run(c, &o);
}

/* Takes the newcomers of a DECIDE or COMMIT in: members again, with a new
 * detector view. Returns 0 or the view's failure (the caller ends the job). */
int cr_take_in(cr_t *c, const phx_ck_eset_t *m)
{
    phx_ck_rj_view_t v = cr_rj_view(c);
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_take_in(c->rj.m, &v, m, &o);
    return run(c, &o);
}

/* This newcomer is taken in at the commit of epoch id (on_all_ready). */
void cr_join_at_commit(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    phx_ck_eset_t m;
    if (phx_ck_eset_dec(p, len, c->size, c->nloc, &m) || !phx_ck_rj_mine(c->rj.m, &m, c->n->inc))
        return;
    c->ndead = (int)phx_ck_id_round(id);
    memcpy(c->dead, m.dead, (size_t)c->size);
    int rc = cr_take_in(c, &m);
    if (rc) {
        cr_fatal(c, 1, "taking this rank back in failed: %s", phx_strerror(rc));
        return;
    }
    phx_ck_rj_out_t o = { 0 };
    phx_ck_rj_at_commit(c->rj.m, phx_ck_id_epoch(id), &o);
    run(c, &o);
}

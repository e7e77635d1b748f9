/* recovery=cr: the drain of a node told to stop (SIGTERM with drain-on=term,
 * or `phx drain RANK`). The decisions (who leaves at which checkpoint, the
 * coordinator's own drain, a failure racing it, a job where everyone asks)
 * are ft/ckpt/drain.h's; this file carries out its actions.
 *
 * How a drain runs: the leaver asks the coordinator (CR_DRAIN REQ), which
 * starts a checkpoint at once. LEAVE goes to every live rank before that
 * checkpoint's BEGIN (FIFO links), and the BEGIN's table moves the leavers'
 * slices to survivors (relocated as after their failure: round robin from
 * their buddy) while no buddy is a leaver. At the cut (every worker parked,
 * every earlier message in an inbox) the leavers ship their tasks, queues
 * and finished ids to the new hosts (the move-home path, cr_migrate): the
 * survivors keep their live state, only the new hosts rebuild the slices
 * they take, and nothing is rolled back or redone. The epoch is stored and
 * committed with the leavers holding nothing; at its COMMIT every node
 * marks them dead without a failure (a new membership view for the
 * heartbeat ring, no notice) and each leaver exits 0. A failure before the
 * commit aborts the checkpoint: the recovery round rolls back as usual
 * (the leavers are still members) and the request is planned again.
 *
 * Comm thread. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/ft.h"
#include "core/metrics.h"
#include "core/cr_int.h"
#include "ft/ckpt/drain.h"

struct cr_drain {
    phx_ck_dr_t *m;
    uint8_t *leavers;           /* scratch: a plan's leavers (n) */
    uint8_t *gone;              /* scratch: dead set with the leavers (n) */
    int32_t *bud;               /* scratch: buddies in that set (n) */
    int *loc;                   /* scratch: the slice table a plan moves to (nloc) */
    int hold;                   /* PHX_DRAIN_HOLD=RANK: test hook, this rank never sends its request */
    int why;                    /* PHX_CK_DR_WHY_* of this node's request */
    uint64_t t_req;             /* this node asked (ns) */
    uint8_t *stash;             /* a BEGIN of the membership after a drain, met before its COMMIT */
    size_t stash_len;
    uint64_t stash_id;
    int committing;             /* inside ck_commit: a START waits for its end (cr_drain_idle) */
    uv_timer_t retry;           /* asked: the request again every hb-timeout until the drain */
    int retry_open;             /* retry initialised and not closed */
};

static void run(cr_t *c, const phx_ck_dr_out_t *o);

static phx_ck_dr_view_t view(const cr_t *c)
{
    /* Not before epoch 1, which holds the job's start (cr_on_start). */
    return (phx_ck_dr_view_t){ .dead = c->dead, .coord = cr_coord(c),
                               .idle = c->phase == PH_IDLE && !c->ck_hold && c->store.committed > 0,
                               .round = (uint32_t)c->ndead };
}

int cr_drain_init(cr_t *c)
{
    cr_drain_t *d = calloc(1, sizeof *d);
    if (!d)
        return PHX_ENOMEM;
    c->dr = d;
    d->leavers = calloc((size_t)c->size, 1);
    d->gone = calloc((size_t)c->size, 1);
    d->bud = calloc((size_t)c->size, sizeof *d->bud);
    d->loc = calloc((size_t)c->nloc, sizeof *d->loc);
    if (!d->leavers || !d->gone || !d->bud || !d->loc)
        return PHX_ENOMEM;
    const char *h = getenv("PHX_DRAIN_HOLD");
    d->hold = h && *h && atoi(h) == c->self;
    return phx_ck_dr_create(c->size, c->self, &d->m);
}

static void closed(uv_handle_t *h) { (void)h; }

void cr_drain_stop(cr_t *c)
{
    cr_drain_t *d = c->dr;
    if (d && d->retry_open) {
        d->retry_open = 0;
        uv_timer_stop(&d->retry);
        uv_close((uv_handle_t *)&d->retry, closed);
    }
}

static void on_retry(uv_timer_t *t)
{
    cr_t *c = t->data;
    if (atomic_load(&c->n->stopping))
        return;
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_retry(c->dr->m, &v, &o);
    run(c, &o);
}

void cr_drain_free(cr_t *c)
{
    cr_drain_t *d = c->dr;
    if (!d)
        return;
    phx_ck_dr_destroy(d->m);
    free(d->stash);
    free(d->leavers);
    free(d->gone);
    free(d->bud);
    free(d->loc);
    free(d);
    c->dr = NULL;
}

/* The ops' drain hook: this node was told to stop (why: PHX_CK_DR_WHY_*).
 * 0: a drain was asked for, the node keeps running until its commit;
 * otherwise the caller stops the node as before (said here why). */
int cr_drain_request(void *st, int why)
{
    cr_t *c = st;
    cr_drain_t *d = c->dr;
    const char *no = NULL;
    /* Message logging (mlog-causal, -fast, -pessimistic) drains like cr:
     * the drain's epoch is a commit every node takes, which drops every
     * logged message and det from before it (the leaver's own and those
     * held about it), and its cut is a consistent state, so nothing the
     * leaver holds is needed after it. What stays is keyed by task, not by
     * node (SSN streams and the dup filter live in each task and move with
     * it; a later hand-back finds a logged message's receiver by the slice
     * table), and the partial-round machine learns at that commit that the
     * leaver is gone (phx_mlog_sync_dead), with no failure counted.
     * mlog-team's teams are consecutive ranks whose records roll back
     * together: a leaver would leave a team short, so it refuses. A spare
     * or a respawn stands in for a lost rank: not handed over either. */
    if (c->partial_ok && c->rolls)
        no = "mlog-team's teams are fixed ranks: a drain would break one";
    else if (c->n->cfg.restart_mode != PHX_RESTART_SURVIVORS)
        no = "only restart-on=survivors drains";
    else if (phx_ck_rj_joining(c->rj.m) || c->restarting)
        no = "this node is not a member yet";
    if (no) {
        PHX_WARN("ckpt", "drain refused (%s): stopping as before; the others recover its loss", no);
        phx_evlog("drain_refused", "\"why\":\"%s\"", no);
        return PHX_ENOTSUP;
    }
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    int rc = phx_ck_dr_request(d->m, &v, &o);
    if (rc == 1) {
        PHX_WARN("ckpt", "asked to stop again while draining: stopping now (the others recover)");
        return PHX_EAGAIN;
    }
    if (rc == PHX_ENOSPC) {
        PHX_WARN("ckpt", "drain refused: this is the last live node, there is nobody to hand its tasks to; stopping");
        phx_evlog("drain_refused", "\"why\":\"last node\"");
        return rc;
    }
    d->why = why;
    d->t_req = phx_now_ns();
    PHX_WARN("ckpt", "drain requested (%s): handing this node's tasks over at the next checkpoint",
             why == PHX_CK_DR_WHY_CMD ? "phx drain" : "SIGTERM");
    phx_evlog("drain_request", "\"rank\":%d,\"coord\":%d", c->self, v.coord);
    run(c, &o);
    /* The timer opens here, not at init: a failed init closes no handle. */
    uint64_t hb = (uint64_t)c->n->cfg.hb_timeout_ms;
    if (!d->retry_open && !uv_timer_init(&c->n->loop, &d->retry)) {
        d->retry.data = c;
        d->retry_open = 1;
        uv_timer_start(&d->retry, on_retry, hb, hb);
    }
    return 0;
}

/* CR_DRAIN from peer: REQ (at the coordinator) or LEAVE (id: the
 * checkpoint carrying the plan). */
void cr_drain_ctl(cr_t *c, int peer, uint64_t id, const uint8_t *p, size_t len)
{
    cr_drain_t *d = c->dr;
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_view_t v = view(c);
    switch (phx_ck_dr_kind(p, len)) {
    case PHX_CK_DR_M_REQ: {
        phx_ck_dr_req_t m;
        if (phx_ck_dr_req_dec(p, len, &m) || m.rank != peer) {
            PHX_WARN("ckpt", "malformed drain request from rank %d; ignored", peer);
            return;
        }
        PHX_INFO("ckpt", "rank %d asks to drain", peer);
        phx_ck_dr_on_req(d->m, &v, peer, &o);
        break;
    }
    case PHX_CK_DR_M_LEAVE: {
        phx_ck_dr_leave_t m;
        if (phx_ck_dr_leave_dec(p, len, c->size, &m)) {
            PHX_WARN("ckpt", "malformed drain plan from rank %d; ignored", peer);
            return;
        }
        memset(d->leavers, 0, (size_t)c->size);
        for (size_t i = 0; i < m.ranks.n; i++)
            d->leavers[phx_wire_a32_i32(m.ranks, i)] = 1;
        phx_ck_dr_on_leave(d->m, &v, id, d->leavers);
        break;
    }
    default:
        PHX_WARN("ckpt", "drain message of unknown kind from rank %d; ignored", peer);
        return;
    }
    run(c, &o);
}

/* Coordinator, starting checkpoint id: b holds the buddies BEGIN will
 * carry, *table the slice table it moves to (NULL: none). With a drain,
 * the leavers get no buddy and are nobody's, and *table moves their
 * slices to survivors (its own table). Returns the number of leavers, 0, or
 * -1 when the job was ended instead (every live rank asked). */
int cr_drain_plan(cr_t *c, uint64_t id, int32_t *b, const int **table)
{
    cr_drain_t *d = c->dr;
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    int k = phx_ck_dr_plan(d->m, &v, id, d->leavers, &o);
    if (k > 0) {
        if (*table) {   /* slices already moving home (message logging): not both at one cut */
            PHX_WARN("ckpt", "drain postponed: slices move home at this checkpoint");
            return 0;
        }
        for (int r = 0; r < c->size; r++)
            d->gone[r] = c->dead[r] || d->leavers[r];
        int relocate_b[64], *rb = c->size <= 64 ? relocate_b : malloc((size_t)c->size * sizeof *rb);
        if (!rb) {
            cr_fatal(c, 1, "%s", "out of memory planning a drain");
            return -1;
        }
        for (int r = 0; r < c->size; r++) {
            rb[r] = phx_ck_buddy(c->size, c->ring, d->gone, r);   /* a leaver's: its first new host */
            b[r] = d->gone[r] ? -1 : rb[r];
        }
        int lost = -1, lb = -1;
        int rc = phx_ck_relocate_p(c->size, c->nloc, c->loc, rb, d->gone, c->n->cfg.recovery_helpers, d->loc,
                                   &lost, &lb);
        if (rb != relocate_b)
            free(rb);
        if (rc) {
            PHX_ERROR("ckpt", "drain not planned: relocating the leavers' slices failed (%s)", phx_strerror(rc));
            return 0;
        }
        *table = d->loc;
        char list[128];
        size_t off = 0;
        list[0] = 0;
        for (int r = 0; r < c->size && off < sizeof list - 12; r++)
            if (d->leavers[r])
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", off ? "," : "", r);
        PHX_INFO("ckpt", "drain of rank(s) %s at epoch %llu", list, (unsigned long long)phx_ck_id_epoch(id));
        phx_evlog("drain_plan", "\"epoch\":%llu,\"ranks\":[%s]", (unsigned long long)phx_ck_id_epoch(id), list);
    }
    run(c, &o);   /* LEAVE before BEGIN, or CANCEL */
    return k;
}

/* Checkpoint id committed here (workers still paused). Applies its drain:
 * 1 when this node has left (the caller neither resumes nor goes on). */
int cr_drain_commit(cr_t *c, uint64_t id)
{
    cr_drain_t *d = c->dr;
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_commit(d->m, id, &o);
    /* A request the new view sends to this node itself (it coordinates
     * now) must not start a checkpoint inside this commit, whose end
     * resumes the workers: cr_drain_idle starts it there. */
    d->committing = 1;
    run(c, &o);
    d->committing = 0;
    return phx_ck_dr_left(d->m);
}

/* BEGIN(id) met while this node is in the checkpoint of a drain, before
 * its COMMIT: when the coordinator itself drained, the next one (the
 * lowest survivor) starts its first checkpoint as soon as it committed,
 * and that BEGIN may overtake the old coordinator's COMMIT (another link).
 * Kept (1) and taken once the commit applied the drain (cr_drain_idle);
 * 0: not such a BEGIN. */
int cr_drain_defer_begin(cr_t *c, uint64_t id, const uint8_t *p, size_t len)
{
    cr_drain_t *d = c->dr;
    if (!phx_ck_cm_in_round(c->cm) || !phx_ck_dr_leavers(d->m, phx_ck_cm_id(c->cm)) ||
        (int)phx_ck_id_round(id) <= c->ndead)
        return 0;
    uint8_t *s = malloc(len ? len : 1);
    if (!s)
        return 0;   /* dropped as before: the job then waits for that checkpoint */
    memcpy(s, p, len);
    free(d->stash);
    d->stash = s;
    d->stash_len = len;
    d->stash_id = id;
    PHX_INFO("ckpt", "BEGIN of epoch %llu from the next coordinator came before the drain's commit: kept",
             (unsigned long long)phx_ck_id_epoch(id));
    return 1;
}

/* A failure notice for rank, after cr_on_failure took it. */
void cr_drain_failure(cr_t *c, int rank)
{
    cr_drain_t *d = c->dr;
    free(d->stash);   /* its checkpoint aborts with the failure */
    d->stash = NULL;
    phx_ck_dr_on_failure(d->m, rank);
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_view(d->m, &v, &o);
    run(c, &o);
}

int cr_drain_planned(const cr_t *c, uint64_t id)
{
    return phx_ck_dr_leavers(c->dr->m, id) != NULL;
}

/* This node may have become an idle coordinator (after a commit). */
void cr_drain_idle(cr_t *c)
{
    cr_drain_t *d = c->dr;
    if (atomic_load(&c->n->stopping))
        return;
    if (d->stash && c->phase == PH_IDLE) {   /* the next coordinator's BEGIN, kept */
        uint8_t *s = d->stash;
        d->stash = NULL;
        cr_on_begin(c, d->stash_id, s, d->stash_len);
        free(s);
        if (c->phase != PH_IDLE)
            return;
    }
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_idle(c->dr->m, &v, &o);
    run(c, &o);
}

/* APPLY: the leavers of checkpoint id leave the membership here. */
static void apply(cr_t *c, uint64_t id)
{
    cr_drain_t *d = c->dr;
    const uint8_t *lv = phx_ck_dr_leavers(d->m, id);
    if (!lv)
        return;
    int k = 0, me = lv[c->self];
    for (int r = 0; r < c->size; r++) {
        if (!lv[r] || c->dead[r])
            continue;
        k++;
        phx_evlog("drain_done", "\"rank\":%d,\"epoch\":%llu", r, (unsigned long long)phx_ck_id_epoch(id));
        if (me)
            continue;   /* the leaver keeps its view: it exits */
        c->dead[r] = 1;
        c->ndead++;   /* names the next rounds, as a failure would */
        PHX_INFO("ckpt", "rank %d drained at epoch %llu: its tasks run on the survivors", r,
                 (unsigned long long)phx_ck_id_epoch(id));
    }
    phx_metrics_add(PHX_M_DRAINS, (uint64_t)k);
    if (me || !k)
        return;
    /* Idle reports go to the coordinator of the new view, which starts
     * counting afresh. */
    c->probe.on = 0;
    c->probe.idle_sent = -1;
    phx_ck_quiet_reset(&c->probe.quiet);
    /* A clean leave, not a suspicion: the heartbeat ring is rebuilt without
     * the leavers (every member at this same commit), so nobody waits for
     * their heartbeats or declares them. */
    int rc = phx_ft_new_view(c->n, phx_ck_rj_next_view(c->rj.m), c->dead, NULL);
    if (rc)
        PHX_ERROR("ckpt", "membership view after the drain not installed: %s", phx_strerror(rc));
    phx_ck_dr_view_t v = view(c);
    phx_ck_dr_out_t o = { 0 };
    phx_ck_dr_on_view(d->m, &v, &o);   /* a request pending at a leaving coordinator goes to the next */
    run(c, &o);
}

static void run(cr_t *c, const phx_ck_dr_out_t *o)
{
    cr_drain_t *d = c->dr;
    for (int i = 0; i < o->n && !atomic_load(&c->n->stopping); i++) {
        const phx_ck_dr_act_t *a = &o->a[i];
        switch (a->kind) {
        case PHX_CK_DR_REQ: {
            if (d->hold) {   /* test: the drain never happens, the grace runs out */
                PHX_WARN("ckpt", "PHX_DRAIN_HOLD: drain request to rank %d held back", a->dst);
                phx_evlog("drain_held", "\"coord\":%d", a->dst);
                break;
            }
            uint8_t b[PHX_CK_DR_REQ_LEN];
            phx_ck_dr_req_enc(b, &(phx_ck_dr_req_t){ .rank = c->self, .why = (uint8_t)d->why });
            cr_ctl(c, a->dst, CR_DRAIN, 0, b, sizeof b);
            break;
        }
        case PHX_CK_DR_START:
            if (!d->committing)
                cr_begin_checkpoint(c);
            break;
        case PHX_CK_DR_LEAVE: {
            uint8_t buf[4 + 4 + 4 * 256], *p = buf;
            size_t cap = phx_ck_dr_leave_len(c->size);
            if (cap > sizeof buf && !(p = malloc(cap))) {
                cr_fatal(c, 1, "%s", "out of memory sending a drain plan");
                return;
            }
            long len = phx_ck_dr_leave_enc(d->leavers, c->size, p, cap);
            if (len > 0)
                cr_ctl_all(c, CR_DRAIN, a->id, p, (size_t)len, 1);
            if (p != buf)
                free(p);
            break;
        }
        case PHX_CK_DR_CANCEL:
            fprintf(stderr, "phalanx: every live node was asked to leave (drain): the job is cancelled, not "
                            "drained into nobody; exiting %d\n", 128 + SIGTERM);
            phx_evlog("drain_cancel", NULL);
            phx_node_exit(c->n, 128 + SIGTERM, 1);
            break;
        case PHX_CK_DR_APPLY:
            apply(c, a->id);
            break;
        case PHX_CK_DR_EXIT: {
            double ms = d->t_req ? (double)(phx_now_ns() - d->t_req) / 1e6 : 0;
            PHX_WARN("ckpt", "drained: this node's tasks were handed over at epoch %llu (%.1f ms after the "
                             "request); exiting 0", (unsigned long long)phx_ck_id_epoch(a->id), ms);
            phx_evlog("drain_exit", "\"epoch\":%llu,\"ms\":%.3f", (unsigned long long)phx_ck_id_epoch(a->id), ms);
            phx_node_exit(c->n, 0, 0);
            break;
        }
        }
    }
}

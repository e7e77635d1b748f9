/* Message logging's partial round, in the checkpoint period cr's commits
 * bound (the modes are in core/mlog.c, the replay in core/mlog_replay.c).
 * The round's rules are the state machine ft/mlog/rec.h; this file feeds
 * it cr's events and the RDONE/RFIN frames and carries out its actions:
 *   - the failure notice: which ranks the period lost, where every task
 *     was at its first failure, under mlog-team the team that rolls back;
 *   - cr's coordinator asks whether the losses are recovered partially
 *     (ft/mlog/multi.h's rule) and which live ranks roll back;
 *   - the round's begin (workers paused) and, at its end, the hand-back
 *     (Alg. 5): dets to the restored tasks' new hosts, then the logged
 *     messages, then ML_RDONE to every live rank; a rolled-back team-mate
 *     replays its own record instead;
 *   - the period's end at the first commit after its recovery.
 * Threads: the comm thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/mlog_int.h"
#include "ft/mlog/multi.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static const phx_recovery_ops_t *CR = &phx_recovery_cr;

/* cr asks, in a partial round: does live rank r roll back too? */
int phx_mlog_rolls(void *arg, int r)
{
    return phx_ml_rec_rolls(((mlog_t *)arg)->rec, r);
}


typedef struct hb_ctx {
    mlog_t *g;
    uint8_t **dbuf;             /* per host: encoded dets */
    size_t *dlen, *dcap;
    int err;
} hb_ctx_t;

static int hb_lost(void *arg, uint64_t tid)
{
    return phx_mlog_lost_home(((hb_ctx_t *)arg)->g, tid);
}

static void hb_det(void *arg, const phx_det_t *d)
{
    hb_ctx_t *h = arg;
    mlog_t *g = h->g;
    int host = phx_node_host_of(g->n, (phx_tid_t)d->receiver);
    g->dets_back++;
    if (host == g->n->rank) {
        phx_mlog_install(g, d);
        return;
    }
    if (h->dlen[host] + PHX_ML_DET_LEN > h->dcap[host]) {
        size_t cap = h->dcap[host] ? 2 * h->dcap[host] : 4096;
        uint8_t *b = realloc(h->dbuf[host], cap);
        if (!b) {
            h->err = PHX_ENOMEM;
            return;
        }
        h->dbuf[host] = b;
        h->dcap[host] = cap;
    }
    phx_wenc_t e;
    phx_wenc_init(&e, h->dbuf[host] + h->dlen[host], PHX_ML_DET_LEN);
    phx_ml_det_enc(&e, d);
    h->dlen[host] += PHX_ML_DET_LEN;
}

static void hb_msg(void *arg, const phx_ml_entry_t *e)
{
    hb_ctx_t *h = arg;
    mlog_t *g = h->g;
    phx_node_t *n = g->n;
    int host = phx_node_host_of(n, (phx_tid_t)e->dst);
    g->resent++;
    phx_metrics_add(PHX_M_MSGS_REPLAYED, 1);
    if (host == n->rank) {
        phx_msg_t *m = phx_msg_alloc(e->len);
        if (!m) {
            h->err = PHX_ENOMEM;
            return;
        }
        int spawn = !!(e->tag & ML_SPAWN_BIT);
        m->kind = spawn ? PHX_MK_SPAWN : PHX_MK_APP;
        m->type_id = (uint16_t)(e->tag & ~ML_SPAWN_BIT);
        m->peer = n->rank;
        m->hdr.type = spawn ? PHX_FT_SPAWN : PHX_FT_APP;
        m->hdr.src = e->src;
        m->hdr.dst = e->dst;
        m->hdr.ssn = e->ssn;
        m->hdr.tag = e->tag & ~ML_SPAWN_BIT;
        m->hdr.inc = n->inc;
        memcpy(m->data, e->payload, e->len);
        phx_node_enqueue_local(n, m);
        return;
    }
    /* Re-logged there is not needed: this log keeps it until the commit. */
    phx_frame_hdr_t fh = phx_frame_hdr((e->tag & ML_SPAWN_BIT) ? PHX_FT_SPAWN : PHX_FT_APP, e->tag & ~ML_SPAWN_BIT,
                                       e->src, e->dst, e->len);
    fh.ssn = e->ssn;
    fh.inc = n->inc;
    int rc = phx_net_send(n->net, host, &fh, NULL, 0, e->payload, e->len, 0);
    if (rc)
        PHX_WARN("mlog", "re-send to rank %d failed: %s", host, phx_strerror(rc));
}

static int relog_all(void *arg, uint64_t tid)
{
    (void)arg;
    (void)tid;
    return 1;
}

static void relog_add(void *arg, const phx_ml_entry_t *e)
{
    hb_ctx_t *h = arg;
    if (!h->err && phx_mlog_lost_home(h->g, e->src))
        h->err = phx_team_relog_add(&h->g->relog, e->src, e->dst, e->ssn);
}

/* This node is a team-mate of the dead one and reloaded its own copy
 * (workers paused): its tasks replay its own record of their deliveries
 * (rule 1: complete, unlike what other nodes hold, which may have died
 * with the failed node), and what they send again is not logged twice
 * (rule 2). */
static int team_rollback(mlog_t *g)
{
    uint64_t n0 = g->installed;
    for (int i = 0; i < g->n->nworkers; i++)   /* the reload took the counter back */
        if (atomic_load(&g->n->next_seq) < g->seq_hw[i])
            atomic_store(&g->n->next_seq, g->seq_hw[i]);
    for (int i = 0; i < g->n->nworkers; i++) {
        if (g->own[i].err)
            return PHX_ENOMEM;   /* a hole: the replay could diverge */
        for (size_t k = 0; k < g->own[i].n; k++)
            phx_mlog_install(g, &g->own[i].d[k]);
    }
    hb_ctx_t h = { .g = g };
    phx_ml_restart_cb_t cb = { &h, relog_all, NULL, relog_add };
    phx_ml_restart_msgs(g->ml, &cb);
    phx_team_relog_seal(&g->relog);
    phx_evlog("mlog_team_rollback", "\"own_dets\":%llu,\"relog\":%llu", (unsigned long long)(g->installed - n0),
              (unsigned long long)g->relog.n);
    return h.err;
}

/* Comm thread, at the period's first failure: where every task was. */
static void snap_hosts(mlog_t *g)
{
    phx_node_t *n = g->n;
    size_t k = n->loc ? (size_t)n->loc_n * PHX_LOC_SLICES : 0;
    int *h = k ? realloc(g->hloc, k * sizeof *h) : NULL;
    if (k && !h) {
        PHX_ERROR("mlog", "out of memory recording task hosts at a failure: ending the job");
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    if (h)
        memcpy(h, n->loc, k * sizeof *h);
    else
        free(g->hloc);
    g->hloc = h;
    g->hloc_n = h ? n->loc_n : 0;
}

/* The hand-back's work (Alg. 5), workers paused: dets to the restored
 * tasks' new hosts, a rolled-back team-mate's own record, then the logged
 * messages. */
static void handback_work(mlog_t *g, const phx_ml_rec_act_t *a)
{
    phx_node_t *n = g->n;
    int sz = n->size;
    hb_ctx_t h = { .g = g };
    h.dbuf = calloc((size_t)sz, sizeof *h.dbuf);
    h.dlen = calloc((size_t)sz, sizeof *h.dlen);
    h.dcap = calloc((size_t)sz, sizeof *h.dcap);
    if (!h.dbuf || !h.dlen || !h.dcap)
        h.err = PHX_ENOMEM;
    /* Dets first (those other nodes' trailers left here; this node's own
     * name only its own tasks), each host's in one frame. */
    phx_ml_restart_cb_t dcb = { &h, hb_lost, hb_det, NULL };
    /* PHX_MLOG_TEST_NO_DETS=1 (tests only): hand back no dets, so replays
     * take arrival order; the negative control of tests/integration. */
    const char *nd = getenv("PHX_MLOG_TEST_NO_DETS");
    if (!h.err && a->dets && !(nd && nd[0] == '1'))
        phx_ml_restart_dets(g->ml, &dcb);
    for (int r = 0; r < sz && !h.err; r++)
        if (h.dlen[r])
            phx_mlog_ctl(g, r, ML_RDETS, h.dbuf[r], h.dlen[r]);
    if (!h.err && a->own)
        h.err = team_rollback(g);
    phx_ml_restart_cb_t mcb = { &h, hb_lost, NULL, hb_msg };
    if (!h.err)
        phx_ml_restart_msgs(g->ml, &mcb);
    if (h.err) {
        PHX_ERROR("mlog", "hand-back failed (%s): ending the job", phx_strerror(h.err));
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
    for (int r = 0; r < sz; r++)
        free(h.dbuf ? h.dbuf[r] : NULL);
    free(h.dbuf);
    free(h.dlen);
    free(h.dcap);
    phx_mlog_own_stop(g);
    phx_evlog("mlog_handback", "\"dets\":%llu,\"msgs\":%llu", (unsigned long long)g->dets_back,
              (unsigned long long)g->resent);
}

static void on_hold_timer(uv_timer_t *t);

/* Carries out what the machine queued, in order, after the event that
 * returned rc (epoch: the commit's, for its log lines). */
static void act(mlog_t *g, int rc, uint64_t epoch)
{
    phx_node_t *n = g->n;
    if (rc) {   /* cannot happen: the queue holds every event's actions */
        PHX_ERROR("mlog", "partial round's actions lost (%s): ending the job", phx_strerror(rc));
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
    phx_ml_rec_act_t a;
    while (phx_ml_rec_next(g->rec, &a)) {
        switch (a.what) {
        case PHX_ML_REC_SEND_ALL: {   /* to every peer live in the machine's view, now */
            uint8_t b[PHX_ML_ROUND_LEN];
            phx_ml_round_enc(b, a.round);
            const uint8_t *dead = phx_ml_rec_dead(g->rec);
            for (int r = 0; r < n->size; r++)
                if (r != n->rank && !dead[r])
                    phx_mlog_ctl(g, r, a.kind == PHX_ML_REC_RDONE ? ML_RDONE : ML_RFIN, b, sizeof b);
            break;
        }
        case PHX_ML_REC_SNAP_HOSTS:
            snap_hosts(g);   /* before cr relocates anything */
            break;
        case PHX_ML_REC_BEGIN:
            atomic_store(&g->rround, a.round);
            if (a.guard)
                atomic_fetch_add(&g->left, 1);
            atomic_store(&g->rel, 0);
            if (a.nfail > 1)
                phx_evlog("mlog_partial_multi", "\"failures\":%d,\"sequential\":%d", a.nfail, a.seq);
            break;
        case PHX_ML_REC_PHASE:
            atomic_store(&g->phase, 1);
            break;
        case PHX_ML_REC_HOLD:
            phx_cr_hold(g->cr, a.on);
            break;
        case PHX_ML_REC_HANDBACK:
            handback_work(g, &a);
            break;
        case PHX_ML_REC_RELEASE_HELD:
            phx_evlog("mlog_release_held", "\"tasks\":%d", atomic_load(&g->nrep));
            uv_timer_start(&g->hold_timer, on_hold_timer, 1, 1);
            break;
        case PHX_ML_REC_RELEASE:
            phx_mlog_release(g);
            break;
        case PHX_ML_REC_DROP:
            phx_mlog_drop_replays(g);
            break;
        case PHX_ML_REC_FALLBACK:
            phx_evlog("mlog_fallback", "\"failures\":%d,\"reason\":\"%s\"", a.nfail,
                      a.seq ? "after a partial round" : "rule");
            break;
        case PHX_ML_REC_PERIOD:
            /* Records, counts and the release start afresh; rule 1 again
             * from this commit under mlog-team (ml_listen clears them). */
            phx_evlog("mlog_period", "\"epoch\":%llu,\"failures\":%d,\"global\":%d", (unsigned long long)epoch,
                      a.nfail, a.global);
            atomic_store(&g->rel, 0);
            atomic_store(&g->left, 0);
            pthread_rwlock_wrlock(&g->rep_lock);
            phx_mlog_free_replays(g);
            atomic_store(&g->nrep, 0);
            pthread_rwlock_unlock(&g->rep_lock);
            if (g->team > 1 && g->own)
                atomic_store(&g->own_on, 1);
            break;
        case PHX_ML_REC_PERIOD_KEPT:
            PHX_WARN("mlog", "epoch %llu committed during a replay: the next failure rolls back globally",
                     (unsigned long long)epoch);
            break;
        case PHX_ML_REC_WORK_LOST:
            if (a.why == PHX_ML_REC_DISAGREE)
                fprintf(stderr, "phalanx: rank %d: message logging: this node's failures of the period (%d) "
                                "disagree with the partial recovery decided (%d); ending the job rather than "
                                "replay without determinants\n", n->rank, a.nfail, a.seq);
            else
                fprintf(stderr, "phalanx: rank %d: message logging: a partial recovery ended here without its "
                                "start; ending the job rather than replay without determinants\n", n->rank);
            phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
            break;
        }
    }
}

/* PHX_MLOG_TEST_HOLD_RELEASE's gate: the release may go once FILE exists. */
static int gate_open(void *ctx)
{
    mlog_t *g = ctx;
    return !g->hold_file || !access(g->hold_file, F_OK);
}

static void on_hold_timer(uv_timer_t *t)
{
    mlog_t *g = t->data;
    if (phx_ml_rec_released(g->rec) || !access(g->hold_file, F_OK))
        uv_timer_stop(t);
    act(g, phx_ml_rec_retry(g->rec), 0);
}

/* The comm-thread call the replay phase's end queues (g->replay_end),
 * naming the round it ended: the machine drops an earlier round's. */
static void replay_end(phx_node_t *n, phx_msg_t *m)
{
    uint32_t round = 0;
    if (m->hdr.len >= sizeof round)
        memcpy(&round, m->data, sizeof round);
    phx_msg_free(m);
    mlog_t *g = n->rec_st;
    if (g)
        act(g, phx_ml_rec_replay_done(g->rec, round), 0);
}

int phx_mlog_round_init(mlog_t *g)
{
    phx_node_t *n = g->n;
    phx_mld_mode_t md = g->fast ? PHX_MLD_FAST : g->pess ? PHX_MLD_PESSIMISTIC : g->team ? PHX_MLD_TEAM
                                                                                      : PHX_MLD_CAUSAL;
    const char *hf = getenv("PHX_MLOG_TEST_HOLD_RELEASE");
    if (hf && hf[0] && !g->fast)
        g->hold_file = hf;
    phx_ml_rec_cfg_t c = { .n = n->size, .rank = n->rank, .mode = md, .team = g->team, .ctx = g,
                           .gate = g->hold_file ? gate_open : NULL };
    int rc = phx_ml_rec_create(&c, &g->rec);
    if (rc)
        return rc;
    g->replay_end = replay_end;
    return 0;
}

void phx_mlog_round_start(mlog_t *g)
{
    if (g->hold_file) {
        uv_timer_init(&g->n->loop, &g->hold_timer);
        g->hold_timer.data = g;
        g->hold_timer_on = 1;
    }
}

void phx_mlog_round_stop(mlog_t *g)
{
    if (g->hold_timer_on) {
        g->hold_timer_on = 0;
        uv_timer_stop(&g->hold_timer);
        uv_close((uv_handle_t *)&g->hold_timer, NULL);
    }
}

/* cr's partial round restores here (workers paused), before any task. */
void phx_mlog_partial_begin(mlog_t *g)
{
    uint8_t *since = calloc((size_t)g->n->size, 1);   /* NULL: the machine ends the job */
    if (since)
        (void)phx_cr_lost_since(g->cr, since);
    act(g, phx_ml_rec_partial_begin(g->rec, since), 0);
    free(since);
}

/* cr's partial round ended here (workers paused): hand back, then RDONE. */
void phx_mlog_handback(mlog_t *g)
{
    act(g, phx_ml_rec_handback(g->rec), 0);
}

/* cr's coordinator: may the losses of this period be recovered partially? */
int phx_mlog_when(void *arg, const uint8_t *dead, const uint8_t *since, int replayed)
{
    mlog_t *g = arg;
    int rp = replayed == PHX_CR_REPLAYED_NONE    ? PHX_MLD_REPLAYED_NONE
           : replayed == PHX_CR_REPLAYED_ENDED ? PHX_MLD_REPLAYED_ENDED
                                               : PHX_MLD_REPLAYED_OTHER;
    return phx_ml_rec_decide(g->rec, dead, since, rp);
}

/* Comm thread, at a commit (workers paused). After failures a new
 * checkpoint period begins: cr begins no checkpoint while a replay is under
 * way anywhere (the machine's hold), and none during a round, so this
 * commit follows the end of this period's recovery on every node; its
 * logs, dets and the dead node's moved tasks are in this epoch, stored
 * twice. The next failure is a first one again (cr counts the ranks dead
 * since the commit the same way: rb_try_decide). */
void phx_mlog_commit(mlog_t *g, uint64_t epoch)
{
    act(g, phx_ml_rec_on_commit(g->rec, atomic_load(&g->phase)), epoch);
}

/* Comm thread, at a global rollback (workers paused): a partial recovery
 * still under way is void (the machine's DROP, and the hold ends). */
void phx_mlog_rollback(mlog_t *g)
{
    act(g, phx_ml_rec_on_rollback(g->rec), 0);
}

void phx_mlog_sync_dead(mlog_t *g)
{
    for (int r = 0; r < g->n->size; r++)
        phx_ml_rec_set_dead(g->rec, r, phx_cr_dead(g->cr, r));
}

/* Comm thread: ML_RDONE / ML_RFIN from peer (1), or another frame (0). */
int phx_mlog_round_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    if (h->tag != ML_RDONE && h->tag != ML_RFIN)
        return 0;
    uint32_t k;
    if (phx_ml_round_dec(p, h->len, &k))
        k = 0;
    act(g, h->tag == ML_RDONE ? phx_ml_rec_on_rdone(g->rec, peer, k) : phx_ml_rec_on_rfin(g->rec, peer, k), 0);
    return 1;
}

int phx_mlog_on_failure(void *st, int rank)
{
    mlog_t *g = st;
    /* Whether this failure is recovered partially (two in one round, or
     * one after the period's partial round ended everywhere) is cr's
     * coordinator's decision by ft/mlog/multi.h's rule; workers stay paused
     * until it. A global rollback voids a replay under way (ml_listen). */
    act(g, phx_ml_rec_on_failure(g->rec, rank), 0);
    int rc = CR->on_failure(g->cr, rank);
    if (g->pess)
        phx_mlog_flush(g);   /* a worker may wait on a flush the dead rank never acked */
    return rc;
}

/* Message-logging recovery modes: mlog-causal, mlog-pessimistic,
 * mlog-fast and mlog-team, layered on recovery=cr (core/ckpt.c, core/cr.h), whose
 * coordinated checkpoints bound the logs and whose recovery round
 * (agreement, relocation, buddy copies) restores the dead node's tasks.
 * The protocol is ft/mlog's state machine; this file feeds it.
 *
 * cr's commit of an epoch empties the logs (Alg. 4), the first of a
 * period after failures ends it.
 * Recovery ("partial recovery" below): the first failure of a checkpoint
 * period restores only the dead node's tasks, survivors hand back dets and
 * logged messages and keep running; so do two failures where
 * ft/mlog/multi.h's rule says their dets survived (in one round: mlog-fast,
 * mlog-pessimistic when neither stored the other's; the second after the
 * first's round ended everywhere: mlog-pessimistic by the same pairs); any
 * other failure in the period falls back to cr's global rollback. A period
 * ends at the first commit after its
 * recovery ended everywhere (phx_mlog_commit): the logs and dets were dropped
 * and the moved tasks are stored twice again.
 *
 * The work is in three files beside this one (core/mlog_int.h): recording
 * (mlog_log.c), the partial round (mlog_round.c) and the replay
 * (mlog_replay.c). This file holds the modes' ops tables, their init,
 * configuration and teardown, cr's events and the control-frame dispatch.
 *
 * Threads: everything on the comm thread except the worker hooks (the
 * delivery, spawn and send hooks, replay admission), which touch only their
 * own queue, atomics, the replay records under their mutex and (the
 * pessimistic wait) reads of every queue's indices. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/mlog_int.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

static const phx_recovery_ops_t *CR = &phx_recovery_cr;

static int is_pess(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_pessimistic;
}

static int is_fast(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_fast;
}

static int is_team(const phx_node_t *n)
{
    return n->rec == &phx_recovery_mlog_team;
}

extern phx_type_t phx_types[PHX_MAX_TYPES];
extern int phx_ntypes;

static int ml_configure(phx_node_t *n)
{
    if (is_team(n) && n->cfg.mlog_team_size < 1) {
        fprintf(stderr, "phalanx: bad value '%d' for option mlog-team-size: expected a team size of 1 or more "
                        "nodes (1 is mlog-causal)\n", n->cfg.mlog_team_size);
        return PHX_EINVAL;
    }
    /* Without determinants a replay may deliver in another order: only a
     * receive-deterministic task gets the same state from it. Refused
     * here, before anything runs, rather than a wrong answer later. */
    for (int i = 0; is_fast(n) && i < phx_ntypes; i++)
        if (!(phx_types[i].flags & PHX_TYPE_RECV_DET)) {
            fprintf(stderr, "phalanx: recovery=mlog-fast needs receive-deterministic task types; type '%s' "
                            "is not declared so (PHX_TYPE_RECV_DET): use mlog-causal\n",
                    phx_types[i].name ? phx_types[i].name : "?");
            return PHX_EINVAL;
        }
    return CR->configure(n);
}

static void ml_listen(void *arg, int what, uint64_t epoch)
{
    mlog_t *g = arg;
    /* Ranks cr took back in (a respawn's round, or a commit after a
     * partial one) are live again: they store dets, hand back and finish
     * replays like any other. */
    if (what == PHX_CR_COMMIT || what == PHX_CR_ROLLBACK || what == PHX_CR_JOINED)
        phx_mlog_sync_dead(g);
    if (what == PHX_CR_JOINED) {
        /* A newcomer's trailers carry the epoch it joined at (survivors
         * committed it just before: nothing changes there). */
        phx_ml_checkpoint(g->ml, epoch);
        phx_mlog_hold_release(g);
        return;
    }
    if (what == PHX_CR_COMMIT)
        phx_mlog_commit(g, epoch);   /* after failures, the period may end */
    if (what == PHX_CR_PARTIAL_BEGIN) {
        phx_mlog_partial_begin(g);
        return;
    }
    if (what == PHX_CR_PARTIAL) {
        phx_mlog_handback(g);
        return;
    }
    if (what == PHX_CR_ROLLBACK) {
        /* A partial recovery still under way is void: its records would
         * hold the restored tasks' deliveries for ever (no hand-back
         * follows), and its hold would keep every checkpoint back (cr is
         * in its round: nothing begins at the release). */
        phx_mlog_rollback(g);
        phx_mlog_hold_drop(g);   /* the future they came from is undone */
        atomic_store(&g->own_on, 0);   /* no partial recovery follows a global rollback */
        phx_team_relog_clear(&g->relog);
    }
    /* Records restart at every commit or rollback. The relog filter
     * outlives commits: a replay may still re-send after the checkpoint
     * that follows its round, and those sends are old. */
    phx_mlog_own_clear(g);
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    /* A commit makes the logged messages and the dets it holds useless
     * (Alg. 4; dets sent after their origin's commit stay); a rollback
     * undoes what they all describe. Workers are paused either way. */
    if (what == PHX_CR_COMMIT) {
        phx_ml_checkpoint(g->ml, epoch);
        phx_mlog_hold_release(g);   /* every det is in the checkpoint now */
    } else
        phx_ml_rollback(g->ml, epoch);
    g->log_bytes = 0;
    phx_mlog_gauges(g);
    phx_evlog(what == PHX_CR_COMMIT ? "mlog_gc" : "mlog_reset", "\"epoch\":%llu,\"log_len\":%llu,\"detlog_len\":%llu",
              (unsigned long long)epoch, (unsigned long long)s.log_len, (unsigned long long)s.detlog_len);
}

static int ml_init(phx_node_t *n, void **out)
{
    mlog_t *g = calloc(1, sizeof *g);
    if (!g)
        return PHX_ENOMEM;
    g->n = n;
    g->pess = is_pess(n);
    g->fast = is_fast(n);
    g->team = is_team(n) ? n->cfg.mlog_team_size : 0;
    if (g->team > 1) {
        g->own = calloc((size_t)n->nworkers, sizeof *g->own);
        g->seq_hw = calloc((size_t)n->nworkers, sizeof *g->seq_hw);
        atomic_store(&g->own_on, g->own != NULL);
    }
    g->store = -1;
    if (g->pess) {
        g->hold = phx_ml_hold_create(n->nworkers);
        g->bsnap = calloc((size_t)n->nworkers, sizeof *g->bsnap);
    }
    phx_ml_cfg_t c = { .rank = n->rank, .n = n->size, .inc = n->inc, .nq = n->nworkers, .qcap = QCAP,
                       .pessimistic = g->pess };
    phx_map_init(&g->rep);
    pthread_rwlock_init(&g->rep_lock, NULL);
    int rc = (g->team > 1 && !(g->own && g->seq_hw)) || (g->pess && !(g->hold && g->bsnap)) ? PHX_ENOMEM : phx_mlog_round_init(g);
    if (!rc && !(g->ml = phx_ml_create(&c)))
        rc = PHX_ENOMEM;
    /* Published before cr's init, which pauses the workers of a respawned
     * rank: they find this state (and g->cr, set before the pause) there. */
    *out = g;
    if (!rc)
        rc = CR->init(n, &g->cr);
    if (rc) {
        *out = NULL;   /* no worker paused: cr pauses them last */
        phx_ml_rec_destroy(g->rec);
        phx_ml_destroy(g->ml);
        phx_map_free(&g->rep);
        free(g->own);
        free(g->seq_hw);
        phx_ml_hold_destroy(g->hold);
        free(g->bsnap);
        free(g);
        return rc;
    }
    phx_cr_listen(g->cr, ml_listen, g, 1);
    phx_cr_partial_when(g->cr, phx_mlog_when);
    if (g->team > 1)
        phx_cr_partial_rolls(g->cr, phx_mlog_rolls);
    phx_mlog_round_start(g);
    phx_mlog_hold_start(g);
    return 0;
}

static void ml_on_start(void *st)
{
    CR->on_start(((mlog_t *)st)->cr);
}

static int ml_on_deliver(void *st, int peer, const phx_frame_hdr_t *h)
{
    return CR->on_deliver(((mlog_t *)st)->cr, peer, h);
}

static void ml_on_ctrl(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    mlog_t *g = st;
    if (h->tag <= PHX_CTRL_CR_LAST || h->tag == PHX_CTRL_CR_DRAIN) {
        CR->on_ctrl(g->cr, peer, h, p);
        return;
    }
    if (!phx_mlog_log_ctrl(g, peer, h, p) && !phx_mlog_replay_ctrl(g, peer, h, p) &&
        !phx_mlog_round_ctrl(g, peer, h, p))
        PHX_WARN("mlog", "unknown control tag %u from rank %d", h->tag, peer);
}

static void ml_on_peer_up(void *st, int peer, uint32_t inc)
{
    CR->on_peer_up(((mlog_t *)st)->cr, peer, inc);   /* a respawned rank, taken in by cr */
}

static void ml_on_checkpoint(void *st)
{
    CR->on_checkpoint(((mlog_t *)st)->cr);
}

/* A drain is cr's (its checkpoint's commit drops the logs and dets from
 * before it, which is all the leaver holds for others); cr refuses it
 * under mlog-team. */
static int ml_drain(void *st, int why)
{
    return CR->drain(((mlog_t *)st)->cr, why);
}

static void ml_worker_pause(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt)
{
    mlog_t *g = st;
    if (g->pess)
        phx_mlog_pause_wait(g);   /* nothing held when the cut comes */
    CR->worker_pause(g->cr, w, lh, lt);
}

static void ml_stop(void *st)
{
    mlog_t *g = st;
    phx_ml_stats_t s;
    phx_ml_stats(g->ml, &s);
    uint64_t dups = 0;
    for (int i = 0; i < g->n->nworkers; i++)
        dups += PHX_CNT_GET(g->n->workers[i].n_dups);
    phx_evlog("mlog_recovery", "\"restored\":%d,\"resent\":%llu,\"dets_back\":%llu,\"installed\":%llu,\"dups\":%llu,"
              "\"spawn_ids_reused\":%llu,\"spawns_waited\":%llu",
              atomic_load(&g->nrep), (unsigned long long)g->resent, (unsigned long long)g->dets_back,
              (unsigned long long)g->installed, (unsigned long long)dups,
              (unsigned long long)atomic_load(&g->spawns_reused), (unsigned long long)atomic_load(&g->spawns_waited));
    /* PHX_MLOG_DEBUG=1: messages still held when the job ends (read racily
     * from the workers' maps: a diagnosis aid, never on by default). */
    const char *dbg = getenv("PHX_MLOG_DEBUG");
    for (int i = 0; dbg && dbg[0] == '1' && i < g->n->nworkers; i++) {
        phx_worker_t *w = &g->n->workers[i];
        for (size_t k = 0; k < w->tasks.cap; k++) {
            if (!w->tasks.keys[k])
                continue;
            phx_task_t *t = (phx_task_t *)(uintptr_t)w->tasks.vals[k];
            size_t j = 0;
            for (const phx_msg_t *x; (x = phx_held_next(&t->held, &j));) {
                uint64_t *l = phx_map_get(&t->in_ssn, x->hdr.src);
                phx_evlog("mlog_held", "\"task\":\"%#llx\",\"rsn\":%llu,\"src\":\"%#llx\",\"ssn\":%llu,\"last\":%llu",
                          (unsigned long long)t->id, (unsigned long long)t->rsn, (unsigned long long)x->hdr.src,
                          (unsigned long long)x->hdr.ssn, (unsigned long long)(l ? *l : 0));
            }
        }
        for (size_t k = 0; k < w->pending.cap; k++)
            if (w->pending.keys[k])
                phx_evlog("mlog_pending", "\"task\":\"%#llx\"", (unsigned long long)w->pending.keys[k]);
    }
    phx_mlog_replay_dump(g);
    phx_mlog_hold_drop(g);   /* the job is over: nothing more leaves */
    /* Thesis Table 3.1's figures for this node. */
    phx_evlog("mlog_stats",
              "\"dets\":%llu,\"logged\":%llu,\"logged_bytes\":%llu,\"local\":%llu,\"frames_pb\":%llu,"
              "\"dets_pb\":%llu,\"pb_bytes\":%llu,\"dets_stored\":%llu,\"ctrl_frames\":%llu,"
              "\"piggybacked_on_app\":%llu,\"team\":%d,\"unlogged_team\":%llu,\"relogs_skipped\":%llu,"
              "\"gate_waits\":%llu",
              (unsigned long long)s.dets, (unsigned long long)s.logged, (unsigned long long)s.logged_bytes,
              (unsigned long long)s.local, (unsigned long long)s.frames_pb, (unsigned long long)s.dets_pb,
              (unsigned long long)s.pb_bytes, (unsigned long long)s.dets_stored,
              (unsigned long long)g->ctrl_frames, (unsigned long long)g->trailers, g->team,
              (unsigned long long)g->team_unlogged, (unsigned long long)g->relogs_skipped,
              (unsigned long long)atomic_load(&g->gate_waits));
    if (getenv("PHX_STATS"))
        fprintf(stderr, "{\"rank\":%d,\"mlog_dets\":%llu,\"mlog_logged\":%llu,\"mlog_dets_pb\":%llu,"
                        "\"mlog_pb_bytes\":%llu}\n", g->n->rank, (unsigned long long)s.dets,
                (unsigned long long)s.logged, (unsigned long long)s.dets_pb, (unsigned long long)s.pb_bytes);
    for (int i = 0; i < g->n->nworkers; i++)
        phx_detq_close(phx_ml_queue(g->ml, i));   /* workers blocked on a full queue leave */
    phx_mlog_round_stop(g);
    phx_mlog_hold_stop(g);
    CR->stop(g->cr);
}

static void ml_destroy(void *st)
{
    mlog_t *g = st;
    phx_mlog_hold_drop(g);
    phx_ml_hold_destroy(g->hold);
    free(g->bsnap);
    phx_mlog_free_replays(g);
    pthread_rwlock_destroy(&g->rep_lock);
    phx_mlog_own_clear(g);
    free(g->own);
    free(g->seq_hw);
    phx_team_relog_clear(&g->relog);
    free(g->hloc);
    CR->destroy(g->cr);
    phx_ml_destroy(g->ml);
    phx_ml_rec_destroy(g->rec);
    free(g->buf);
    free(g);
}

/* The worker hooks record and replay determinants; mlog-fast makes none
 * and holds nothing back, so it has none. */
#define WORKER_HOOKS .delivered = phx_mlog_delivered, .admit = phx_mlog_admit, .admit_next = phx_mlog_admit_next, .spawn = phx_mlog_spawn
#define NO_WORKER_HOOKS .delivered = NULL
/* Pessimistic: a message leaves the node only once the determinants made
 * before it are stored on another node (held on the comm thread until then). */
#define PESS_WORKER_HOOKS WORKER_HOOKS, .send = phx_mlog_send_gate, .out_gate = phx_mlog_out_gate, \
                          .out_drained = phx_mlog_out_drained
#define OPS(nm, hlp, hooks)                                                                                  \
    {                                                                                                          \
        .name = nm, .help = hlp, .configure = ml_configure, .init = ml_init, .on_start = ml_on_start,          \
        .on_send = phx_mlog_on_send, .on_deliver = ml_on_deliver, .on_ctrl = ml_on_ctrl,                             \
        .on_failure = phx_mlog_on_failure, .on_checkpoint = ml_on_checkpoint, .on_restore = phx_mlog_on_restore,           \
        .worker_pause = ml_worker_pause, .on_peer_up = ml_on_peer_up, .drain = ml_drain,                       \
        .stop = ml_stop, .destroy = ml_destroy, hooks,                                                         \
    }

const phx_recovery_ops_t phx_recovery_mlog_causal =
    OPS("mlog-causal", "causal message logging (SCML) over cr's checkpoints: the first failure restores only the dead node's tasks", WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_fast =
    OPS("mlog-fast", "message logging without determinants for receive-deterministic task types (PHX_TYPE_RECV_DET): the first failure restores only the dead node's tasks",
        NO_WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_team =
    OPS("mlog-team", "team-based causal message logging (teams of mlog-team-size consecutive ranks): only messages "
                     "between teams are logged; the first failure rolls back exactly the dead node's team",
        WORKER_HOOKS);
const phx_recovery_ops_t phx_recovery_mlog_pessimistic =
    OPS("mlog-pessimistic", "pessimistic message logging over cr's checkpoints: the first failure restores only the dead node's tasks",
        PESS_WORKER_HOOKS);


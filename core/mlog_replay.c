/* Message logging's replay of the tasks a partial round restored here
 * (the modes are in core/mlog.c, the round in core/mlog_round.c).
 * The job's first failure under mlog-causal: cr restores only the dead
 * node's tasks, spread over the survivors (on_restore below makes a replay
 * record for each); at the end of that round (PHX_CR_PARTIAL, workers still
 * paused) every node hands back what it holds for them (Alg. 5): the dets
 * whose receiver is one of them (ML_RDETS to its new host), then the logged
 * messages bound to them (app frames, same link: after the dets), then
 * ML_RDONE to every live rank. A new host releases its restored tasks once
 * every live rank's RDONE arrived: until then they deliver only what the
 * installed dets name, in rsn order, and hold the rest. Survivors keep
 * running; what the restored tasks send again is dropped by SSN.
 * Here: each restored task's replay record, admission in the installed
 * dets' order, spawn ids, the release once every live rank handed back,
 * and the end of the replays (RFIN), which lets cr checkpoint again.
 *
 * Threads: the comm thread, except phx_mlog_admit, phx_mlog_admit_next and
 * phx_mlog_spawn (workers), which touch the replay records under
 * their mutex and atomics. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/eventlog.h"
#include "core/metrics.h"
#include "core/mlog_int.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

/* Replay state of a task restored here (a worker reads it, the comm thread
 * installs dets and releases: the mutex orders them). */
typedef struct rep {
    pthread_mutex_t mu;
    phx_ml_task_t mt;
    int finished;               /* counted out of `left` */
} rep_t;

/* Was tid on a rank this period's recovery restores (its host at the
 * period's first failure)? Either thread, see hloc. */
int phx_mlog_lost_home(const mlog_t *g, uint64_t tid)
{
    int h = phx_tid_home((phx_tid_t)tid);
    if (g->hloc && h >= 0 && h < g->hloc_n)
        h = g->hloc[h * PHX_LOC_SLICES + phx_loc_slice((phx_tid_t)tid)];
    return h >= 0 && h < g->n->size && phx_ml_rec_rb(g->rec)[h];
}

/* Under rep_lock (either side). */
static rep_t *rep_of(mlog_t *g, uint64_t tid)
{
    uint64_t *v = phx_map_get(&g->rep, tid);
    return v ? (rep_t *)(uintptr_t)*v : NULL;
}

/* Comm thread: the record of tid, made if absent with base rsn (a task
 * restored from the checkpoint: its rsn there; one the replay spawns
 * again: 0). NULL when out of memory. */
static rep_t *rep_make(mlog_t *g, uint64_t tid, uint64_t rsn)
{
    pthread_rwlock_wrlock(&g->rep_lock);
    rep_t *r = rep_of(g, tid);
    if (!r && (r = calloc(1, sizeof *r))) {
        uint64_t *slot = phx_map_put(&g->rep, tid);
        if (!slot) {
            free(r);
            r = NULL;
        } else {
            pthread_mutex_init(&r->mu, NULL);
            phx_ml_task_restore(&r->mt, rsn);
            *slot = (uint64_t)(uintptr_t)r;
            atomic_fetch_add(&g->nrep, 1);
        }
    }
    pthread_rwlock_unlock(&g->rep_lock);
    return r;
}

static void kick(mlog_t *g, uint64_t tid);

/* cr restored task tid here (comm thread, workers paused). st is cr's. */
void phx_mlog_on_restore(void *st, phx_tid_t tid)
{
    (void)st;
    phx_node_t *n = phx_node_current;
    mlog_t *g = n ? n->rec_st : NULL;
    if (!g || g->fast)
        return;
    phx_worker_t *w = &n->workers[phx_worker_of(n, tid)];
    uint64_t *tv = phx_map_get(&w->tasks, tid);
    if (!phx_ml_rec_replays(g->rec)) {
        /* No replay follows a global rollback: what the checkpoint kept
         * held back may go now, but nothing would offer it again (the
         * KICK of a release is not packed). */
        if (tv && phx_held_len(&((phx_task_t *)(uintptr_t)*tv)->held))
            kick(g, tid);
        return;
    }
    if (!phx_mlog_lost_home(g, tid))
        return;
    atomic_store(&g->phase, 1);
    if (!tv || !rep_make(g, tid, ((phx_task_t *)(uintptr_t)*tv)->rsn)) {
        PHX_ERROR("mlog", "no replay record for task %#llx: ending the job", (unsigned long long)tid);
        phx_node_exit(n, PHX_EXIT_WORK_LOST, 1);
    }
}


/* Under r->mu, either side: once released, a record that stopped replaying
 * is counted out; the last one ends the phase, so the rest of the job's
 * deliveries skip the lookup and locks below (as under cr). No record can
 * be made after the release: every RDETS precedes its sender's RDONE.
 * The comm thread then tells the round's machine (g->replay_end: RFIN). */
static void end_phase(mlog_t *g)
{
    atomic_store_explicit(&g->phase, 0, memory_order_release);
    phx_evlog("mlog_replay_done", "\"tasks\":%d", atomic_load(&g->nrep));
    phx_metrics_replay_done();
    /* The round this end belongs to: a call still queued when the next
     * round begins is that round's no more (ft/mlog/rec.h drops it). */
    uint32_t round = atomic_load(&g->rround);
    phx_msg_t *m = phx_msg_alloc(sizeof round);
    if (m)
        memcpy(m->data, &round, sizeof round);
    if (!m) {   /* cr's checkpoints would stay held for ever */
        PHX_ERROR("mlog", "out of memory ending a replay: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    m->kind = PHX_MK_CALL;
    m->call = g->replay_end;
    phx_node_enqueue_out(g->n, m);
}

static void rep_finish(mlog_t *g, rep_t *r)
{
    if (r->finished || !r->mt.released || r->mt.replaying)
        return;
    r->finished = 1;
    if (atomic_fetch_sub(&g->left, 1) == 1)
        end_phase(g);
}

/* Worker: takes rep_lock for reading and returns tid's replay record with
 * its mutex held, or NULL (none). rep_leave releases both. */
static rep_t *rep_lock(mlog_t *g, uint64_t tid)
{
    pthread_rwlock_rdlock(&g->rep_lock);
    rep_t *r = rep_of(g, tid);
    if (r)
        pthread_mutex_lock(&r->mu);
    return r;
}

/* Worker: 0 if t is no lost task of a partial recovery under way (no
 * lock taken); else 1 and *r = rep_lock(t's id). */
static int rep_enter(mlog_t *g, const phx_task_t *t, rep_t **r)
{
    if (!atomic_load_explicit(&g->phase, memory_order_acquire) || !phx_mlog_lost_home(g, t->id))
        return 0;
    *r = rep_lock(g, t->id);
    return 1;
}

static void rep_leave(mlog_t *g, rep_t *r)
{
    if (r)
        pthread_mutex_unlock(&r->mu);
    pthread_rwlock_unlock(&g->rep_lock);
}

/* Worker: may <src, ssn> be delivered to t now? Survivors' own tasks
 * always; a dead node's task (restored, or spawned again by the replay)
 * in the order its installed dets give, and nothing else before every
 * live rank handed back (a det naming this message may still come). */
int phx_mlog_admit(void *ctx, int worker, const phx_task_t *t, phx_tid_t src, uint64_t ssn)
{
    (void)worker;
    mlog_t *g = ctx;
    rep_t *r;
    if (!rep_enter(g, t, &r))
        return 0;
    int hold;
    if (!r)
        hold = !atomic_load(&g->rel);
    else {
        hold = phx_ml_task_check(&r->mt, t->rsn, src, ssn) == PHX_ML_HOLD;
        rep_finish(g, r);
    }
    rep_leave(g, r);
    return hold;
}

/* Worker: the one message t may take next, where its replay says. */
int phx_mlog_admit_next(void *ctx, int worker, const phx_task_t *t, phx_tid_t *src, uint64_t *ssn)
{
    (void)worker;
    mlog_t *g = ctx;
    rep_t *r;
    if (!rep_enter(g, t, &r))
        return 0;
    int known = r && phx_ml_task_next(&r->mt, t->rsn, src, ssn);
    rep_leave(g, r);
    return known;
}

/* Worker: the id of replaying task p's k-th spawn in delivery p->rsn:
 * the recorded one, or the fresh id once every live rank handed back and
 * none recorded it (no survivor holds the det, so none heard of that
 * child: the det precedes every frame that could tell of it). Until then
 * a det may still come, so the worker waits: the release comes from the
 * comm threads' hand-backs, which need no worker, and a second failure
 * voids the replay first (phx_mlog_drop_replays sets rel and frees the records). */
static phx_tid_t replay_spawn_id(mlog_t *g, const phx_task_t *p, uint32_t k, phx_tid_t id)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t child = 0;
        rep_t *r = rep_lock(g, p->id);
        int rc = !r ? (atomic_load(&g->rel) ? PHX_ML_SPAWN_NEW : PHX_ML_SPAWN_WAIT)
                    : phx_ml_task_spawn(&r->mt, p->rsn, k, &child);
        rep_leave(g, r);
        if (rc == PHX_ML_SPAWN_FOUND) {
            atomic_fetch_add_explicit(&g->spawns_reused, 1, memory_order_relaxed);
            return (phx_tid_t)child;
        }
        if (rc == PHX_ML_SPAWN_NEW || atomic_load(&g->n->stopping))
            return id;
        if (!spins)
            atomic_fetch_add_explicit(&g->spawns_waited, 1, memory_order_relaxed);
        if (spins < 64)
            sched_yield();
        else {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
}

/* Worker: the spawn hook. p's k-th spawn while handling delivery p->rsn
 * (0: its init) is the event <p, rsn, k> -> child id. A replaying p gets
 * the recorded id back; the det goes into the worker's queue before the
 * spawn leaves either way (a replayed one again, as replayed deliveries'
 * dets are), so the spawn frame, and any later frame of this node, carries
 * it (causal) or it is stored on the next rank first (pessimistic). */
phx_tid_t phx_mlog_spawn(void *ctx, int worker, phx_task_t *p, phx_tid_t id)
{
    mlog_t *g = ctx;
    if (p->spawn_rsn != p->rsn) {
        p->spawn_rsn = p->rsn;
        p->spawn_k = 0;
    }
    uint32_t k = p->spawn_k++;
    if (g->seq_hw && (uint32_t)id + 1 > g->seq_hw[worker])
        g->seq_hw[worker] = (uint32_t)id + 1;   /* the fresh id's low half is the counter */
    /* Records, not phase: a record is counted finished when its last det
     * is admitted, before that delivery's handler (which may spawn) runs,
     * and a task the replay spawns again with no det to replay runs its
     * init whenever its spawn comes. Records live until the period's
     * commit (nrep 0 then, and hloc stays put while records exist). */
    if (atomic_load_explicit(&g->nrep, memory_order_acquire) && phx_mlog_lost_home(g, p->id))
        id = replay_spawn_id(g, p, k, id);
    phx_det_t d = phx_ml_spawn_det(p->id, p->rsn, k, id);
    phx_mlog_record(g, worker, &d);
    return id;
}

static void kick(mlog_t *g, uint64_t tid)
{
    if (phx_node_kick(g->n, (phx_tid_t)tid)) {
        PHX_ERROR("mlog", "out of memory releasing a replay: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

/* Comm thread: the round's machine released (every live rank handed back). */
void phx_mlog_release(mlog_t *g)
{
    atomic_store(&g->rel, 1);
    int bad = 0;
    pthread_rwlock_rdlock(&g->rep_lock);
    /* left counts released records still replaying (an earlier round's
     * among them) plus the guard phx_mlog_partial_begin added: each record this
     * release releases is counted under its mutex just before (so it cannot
     * finish uncounted), and the guard is taken back below, so the phase
     * cannot end while records are still being released. */
    for (size_t i = 0; i < g->rep.cap; i++) {
        if (!g->rep.keys[i])
            continue;
        rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
        pthread_mutex_lock(&r->mu);
        if (r->mt.released) {   /* an earlier round's: replays on, counted already */
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        atomic_fetch_add(&g->left, 1);
        int rc = phx_ml_task_release(&r->mt);
        if (!rc)
            rep_finish(g, r);
        pthread_mutex_unlock(&r->mu);
        if (rc)
            bad = 1;
        kick(g, g->rep.keys[i]);
    }
    pthread_rwlock_unlock(&g->rep_lock);
    if (!bad && atomic_fetch_sub(&g->left, 1) == 1)
        end_phase(g);
    /* Tasks held for want of a record (spawned again, no det) may go now:
     * every worker offers all its held messages again. */
    for (int i = 0; i < g->n->nworkers; i++) {
        phx_msg_t *m = phx_msg_alloc(0);
        if (!m)
            break;
        m->kind = PHX_MK_KICK;
        m->peer = -1;
        m->hdr.dst = 0;
        phx_worker_t *w = &g->n->workers[i];
        atomic_fetch_add_explicit(&g->n->work, 1, memory_order_relaxed);
        PHX_HANDOFF_RELEASE(m);
        cds_wfcq_enqueue(&w->ih, &w->it, &m->qn);
        phx_worker_wake(w);
    }
    phx_evlog("mlog_replay", "\"tasks\":%llu,\"dets_installed\":%llu",
              (unsigned long long)atomic_load(&g->nrep), (unsigned long long)g->installed);
    if (bad) {
        fprintf(stderr, "phalanx: rank %d: message logging lost determinants of a restored task; the result "
                        "would be wrong, ending the job\n", g->n->rank);
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
    }
}

void phx_mlog_install(mlog_t *g, const phx_det_t *d)
{
    if (phx_node_host_of(g->n, (phx_tid_t)d->receiver) != g->n->rank)
        return;   /* restored elsewhere: not ours */
    /* No record yet: a task created after the checkpoint, which the replay
     * spawns again (its rsns start at 0). */
    rep_t *r = rep_make(g, d->receiver, 0);
    if (!r) {
        PHX_ERROR("mlog", "out of memory installing a determinant: ending the job");
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    pthread_mutex_lock(&r->mu);
    int rc = phx_ml_task_install(&r->mt, d);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        PHX_ERROR("mlog", "determinant not installed (%s): ending the job", phx_strerror(rc));
        phx_node_exit(g->n, PHX_EXIT_WORK_LOST, 1);
        return;
    }
    g->installed++;
}

/* Frees every replay record and leaves rep empty. Caller holds rep_lock
 * for writing, or no other thread can reach g. */
void phx_mlog_free_replays(mlog_t *g)
{
    for (size_t i = 0; i < g->rep.cap; i++)
        if (g->rep.keys[i]) {
            rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
            phx_ml_task_free(&r->mt);
            pthread_mutex_destroy(&r->mu);
            free(r);
        }
    phx_map_free(&g->rep);
    phx_map_init(&g->rep);
}

/* Comm thread, on a second failure: the global rollback that follows
 * restores every task from the checkpoint, so a partial recovery still
 * under way is void. Its records would otherwise hold the restored tasks'
 * deliveries for ever (no hand-back follows a global rollback; the machine
 * counts it released). Open the
 * gate first (rel, then phase: phx_mlog_admit reads phase before the lock), then
 * free the records under the write lock. */
void phx_mlog_drop_replays(mlog_t *g)
{
    atomic_store(&g->rel, 1);
    atomic_store_explicit(&g->phase, 0, memory_order_release);
    pthread_rwlock_wrlock(&g->rep_lock);
    phx_mlog_free_replays(g);
    atomic_store(&g->nrep, 0);
    pthread_rwlock_unlock(&g->rep_lock);
}

/* Comm thread: the hand-back's dets from peer (1), or another frame (0). */
int phx_mlog_replay_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p)
{
    if (h->tag == ML_RDETS) {
        phx_wdec_t dc;
        phx_wdec_init(&dc, p, h->len);
        phx_det_t d;
        while (phx_wdec_left(&dc) >= PHX_ML_DET_LEN && !phx_ml_det_dec(&dc, &d))
            phx_mlog_install(g, &d);
        return 1;
    }
    (void)peer;
    return 0;
}

/* Comm thread, at stop: replays still under way when the job ends (a
 * diagnosis aid). */
void phx_mlog_replay_dump(mlog_t *g)
{
    pthread_rwlock_rdlock(&g->rep_lock);
    for (size_t i = 0; i < g->rep.cap; i++)
        if (g->rep.keys[i]) {
            rep_t *r = (rep_t *)(uintptr_t)g->rep.vals[i];
            pthread_mutex_lock(&r->mu);
            if (r->mt.replaying)
                phx_evlog("mlog_replaying", "\"task\":\"%#llx\",\"base\":%llu,\"dets\":%llu,\"released\":%d",
                          (unsigned long long)g->rep.keys[i], (unsigned long long)r->mt.rep_base,
                          (unsigned long long)r->mt.rep_n, r->mt.released);
            pthread_mutex_unlock(&r->mu);
        }
    pthread_rwlock_unlock(&g->rep_lock);
}

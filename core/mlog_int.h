/* The message-logging modes' state, shared by their files only:
 *   mlog.c         the four modes' ops tables, init/destroy, configuration,
 *                  cr's events (commit, rollback, partial round) and the
 *                  control-frame dispatch;
 *   mlog_log.c     recording: the delivery and send hooks, det queues,
 *                  the det frames sent ahead of an app frame, acks, the
 *                  pessimistic hold of outgoing frames;
 *   mlog_round.c   the partial round: feeds its events to the state
 *                  machine ft/mlog/rec.h and carries out its actions (the
 *                  hand-back of dets and logged messages, RDONE/RFIN, the
 *                  checkpoint hold, the release gate, the period's end);
 *   mlog_replay.c  replay: records, admission and order, the spawn hook
 *                  (recorded ids), the release of held messages, the end
 *                  of the replays.
 * Calls point down: mlog.c > mlog_round.c > mlog_replay.c > mlog_log.c
 * (the phase's end reaches mlog_round.c through g->replay_end, a queued
 * call).
 * Threads and ownership are stated at each field and function. */
#ifndef PHX_CORE_MLOG_INT_H
#define PHX_CORE_MLOG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cr.h"
#include "core/node.h"
#include "core/recovery.h"
#include "ft/mlog/hold.h"
#include "ft/mlog/msg.h"
#include "ft/mlog/rec.h"
#include "ft/mlog/scml.h"
#include "ft/mlog/team.h"


/* ML_ACKDETS: u16 ack length, the ack, then a det trailer (causal: the
 * batched ack and the dets for one app frame in one control frame). */
enum { ML_DETS = PHX_CTRL_CR_LAST + 1, ML_ACK, ML_RDETS, ML_RDONE, ML_ACKDETS, ML_RFIN };

#define QCAP (1u << 16)
/* Causal: dets owed an ack before one goes without a frame to carry it
 * (well below QCAP, so an origin's queue never fills for want of acks). */
#define ACK_BATCH (QCAP / 16)
#define ML_SPAWN_BIT (1u << 31)   /* in a logged tag: the entry is a spawn */

typedef struct mlog {
    phx_node_t *n;
    void *cr;                   /* cr's state: checkpoints and the fallback */
    phx_ml_t *ml;
    int pess;
    int fast;                   /* mlog-fast: no determinants at all */
    int team;                   /* mlog-team: team size t (0: another mode) */
    /* The partial round's state machine (ft/mlog/rec.h; comm thread):
     * failures of the period, the recovered ranks (rb), rounds, hand-backs,
     * the release and the checkpoint hold. */
    phx_ml_rec_t *rec;
    /* n->loc at the period's first failure (comm thread writes it before
     * phase is set; workers read it only while phase is set): a task was
     * lost iff its host then is in the machine's rb. Ranks of earlier
     * periods host nothing (relocated), so rb needs no history. */
    int *hloc;
    int hloc_n;
    /* mlog-team (t > 1): each worker's record of its own dets since the
     * commit (rule 1), kept until the first failure's round; and the
     * sends a rolled-back team-mate logged already (rule 2). */
    phx_team_own_t *own;
    _Atomic int own_on;
    phx_team_relog_t relog;
    /* mlog-team: per worker, one past the highest spawn counter value its
     * tasks drew (written by that worker, read while workers are paused).
     * A team-mate's reload brings its counter back to the checkpoint's, but
     * ids drawn since live on outside nodes (and are recorded in spawn
     * dets the replay reuses): the counter must not hand them out again. */
    uint32_t *seq_hw;
    uint64_t team_unlogged, relogs_skipped;
    uint8_t *buf;               /* trailer scratch (comm thread) */
    size_t cap;
    _Atomic int flush_asked;    /* pessimistic: a full flush request is queued */
    /* Pessimistic hold (comm thread; see mlog_log.c and ft/mlog/hold.h):
     * app and spawn frames for other nodes, and whatever the outbox sends
     * behind them, wait there in order until the dets published before
     * they reached the comm thread are stored on the next live rank. A
     * drain's frames share one snapshot (bsnap, nworkers values), taken
     * at its first frame that waits. */
    phx_ml_hold_t *hold;
    uint64_t *bsnap;
    int bsnap_on;                   /* bsnap taken in this drain */
    int store;                      /* the rank dets were last flushed to (-1: none) */
    /* While frames are held: every 100 ms without a release, every
     * unacked det again (a flush whose frame was lost without a failure
     * notice must not hold frames for ever). */
    uv_timer_t retry_timer;
    int retry_on;                   /* retry_timer initialised */
    uint64_t releases, releases_seen;
    /* Remote frames workers queued and the hold did not let go yet (any
     * thread; the comm thread bumps acks when it falls): a worker pausing
     * for a checkpoint or a round waits until it is 0, so a checkpoint's
     * cut never finds a frame held. acks: a futex word, bumped by the comm
     * thread at every ack and release; waiters: the workers sleeping on it. */
    _Atomic int64_t pend;
    _Atomic uint32_t acks;
    _Atomic int waiters;
    _Atomic uint64_t gate_waits;   /* frames that had to wait for an ack */
    uint64_t ctrl_frames;
    uint64_t trailers;          /* det frames sent ahead of an app frame */
    /* Replay of the partial recovery (mlog_replay.c). */
    phx_map_t rep;              /* task id of the dead node -> rep_t *, under rep_lock */
    pthread_rwlock_t rep_lock;  /* workers read, the comm thread adds records */
    _Atomic int nrep;           /* records in rep */
    _Atomic int phase;          /* a partial recovery began: lost tasks are checked */
    _Atomic int left;           /* records still replaying after the release */
    _Atomic int rel;            /* ... and every live rank handed back */
    _Atomic uint32_t rround;    /* the round's machine's round at its last BEGIN (the phase's end names it) */
    /* The comm-thread call queued when the replay phase ends (mlog_round.c
     * sets it: the machine hears of it there). */
    void (*replay_end)(phx_node_t *n, phx_msg_t *m);
    uint64_t resent, dets_back, installed;
    _Atomic uint64_t spawns_reused;   /* replayed spawns given their recorded id */
    _Atomic uint64_t spawns_waited;   /* ... that waited for the release first */
    uint64_t log_bytes;         /* payload bytes in the sender log now */
    /* PHX_MLOG_TEST_HOLD_RELEASE=FILE (tests only): the release waits until
     * FILE exists, polled by hold_timer (comm thread), so a test acts while
     * a replay is under way by construction. */
    const char *hold_file;
    uv_timer_t hold_timer;
    int hold_timer_on;
} mlog_t;

/* ---- mlog_log.c: recording (comm thread unless said) ---------------------- */
void phx_mlog_gauges(mlog_t *g);
void phx_mlog_ctl(mlog_t *g, int peer, int tag, const void *buf, size_t len);
void phx_mlog_flush(mlog_t *g);
void phx_mlog_own_clear(mlog_t *g);
void phx_mlog_own_stop(mlog_t *g);
void phx_mlog_on_send(void *st, const phx_msg_t *m);
/* Worker: records det d in its own queue (delivery and spawn dets alike). */
void phx_mlog_record(mlog_t *g, int worker, const phx_det_t *d);
/* ML_ACKDETS, ML_DETS, ML_ACK from peer: 1 if h was one of them. */
int phx_mlog_log_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p);
/* Worker hooks (phx_recovery_ops_t). */
void phx_mlog_delivered(void *ctx, int worker, phx_tid_t dst, phx_tid_t src, uint64_t ssn, uint64_t rsn, uint32_t inc);
void phx_mlog_send_gate(void *ctx, int worker);
/* Worker, before it parks for a checkpoint or a round (pessimistic): waits
 * until no frame any worker queued is held. */
void phx_mlog_pause_wait(mlog_t *g);
/* Comm thread (pessimistic): the outbox hooks (phx_recovery_ops_t), and
 * the hold's end at a rollback or at stop (its frames are dropped). */
int phx_mlog_out_gate(void *ctx, phx_msg_t *m);
void phx_mlog_out_drained(void *ctx);
void phx_mlog_hold_release(mlog_t *g);
void phx_mlog_hold_drop(mlog_t *g);
/* Comm thread: the retry timer, once init can no longer fail; its close at stop. */
void phx_mlog_hold_start(mlog_t *g);
void phx_mlog_hold_stop(mlog_t *g);

/* ---- mlog_replay.c: replay of restored tasks ------------------------------ */
int phx_mlog_lost_home(const mlog_t *g, uint64_t tid);
void phx_mlog_on_restore(void *st, phx_tid_t tid);
void phx_mlog_install(mlog_t *g, const phx_det_t *d);
/* The machine's release: every record replays, held messages go again. */
void phx_mlog_release(mlog_t *g);
void phx_mlog_free_replays(mlog_t *g);
void phx_mlog_drop_replays(mlog_t *g);
/* ML_RDETS from peer: 1 if h was one. */
int phx_mlog_replay_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p);
/* Diagnosis at stop: the records still replaying, as events. */
void phx_mlog_replay_dump(mlog_t *g);
/* Worker hooks (phx_recovery_ops_t). */
int phx_mlog_admit(void *ctx, int worker, const phx_task_t *t, phx_tid_t src, uint64_t ssn);
int phx_mlog_admit_next(void *ctx, int worker, const phx_task_t *t, phx_tid_t *src, uint64_t *ssn);
phx_tid_t phx_mlog_spawn(void *ctx, int worker, phx_task_t *p, phx_tid_t id);

/* ---- mlog_round.c: the partial round and the period, fed to g->rec ------- */
/* The machine (0 or a negative error); the release gate's timer, once
 * init can no longer fail; its close at stop. */
int phx_mlog_round_init(mlog_t *g);
void phx_mlog_round_start(mlog_t *g);
void phx_mlog_round_stop(mlog_t *g);
int phx_mlog_on_failure(void *st, int rank);
int phx_mlog_rolls(void *arg, int r);
int phx_mlog_when(void *arg, const uint8_t *dead, const uint8_t *since, int replayed);
void phx_mlog_partial_begin(mlog_t *g);
void phx_mlog_handback(mlog_t *g);
/* cr committed epoch (after failures: the period may end) or rolled back. */
void phx_mlog_commit(mlog_t *g, uint64_t epoch);
void phx_mlog_rollback(mlog_t *g);
/* cr's view of who is dead, after a commit, rollback or join. */
void phx_mlog_sync_dead(mlog_t *g);
/* ML_RDONE, ML_RFIN from peer: 1 if h was one of them. */
int phx_mlog_round_ctrl(mlog_t *g, int peer, const phx_frame_hdr_t *h, const uint8_t *p);

#endif

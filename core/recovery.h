/* Recovery modes (configuration key `recovery`): a registry of hook tables.
 *
 * core/node.c calls the phx_recovery_* wrappers below at fixed points and
 * never tests the mode: a mode plugs in by adding its ops to the registry
 * (core/recovery.c). `none` has no ops (a lost node's work is lost); `cr`
 * is coordinated checkpoint/restart (core/ckpt.c, decisions in ft/ckpt/).
 * mlog-causal and mlog-pessimistic (core/mlog.c) are layered on cr.
 *
 * Threads: every hook runs on the comm thread unless stated otherwise. */
#ifndef PHX_CORE_RECOVERY_H
#define PHX_CORE_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"
#include "core/phalanx.h"
#include "net/frame.h"

typedef struct phx_node phx_node_t;
typedef struct phx_worker phx_worker_t;

/* A node and the buddy holding its only other copy died together and no
 * disk checkpoint covers them: the job ends with this code, naming both. */
#define PHX_EXIT_CKPT_LOST 78

/* PHX_FT_CTRL tags 24..39 belong to the recovery modes. */
enum { PHX_CTRL_REC_FIRST = 24, PHX_CTRL_REC_LAST = 47 };
/* cr uses 24..39; message logging (core/mlog.c) 40..47. */
enum { PHX_CTRL_CR_LAST = 39 };

typedef struct phx_recovery_ops {
    const char *name;
    const char *help;
    /* phx_main, before any thread starts: check and adjust the config.
     * 0, or a negative code after printing why. */
    int (*configure)(phx_node_t *n);
    /* After the transport started: allocate the mode's state. */
    int (*init)(phx_node_t *n, void **st);
    /* Rank 0 has just created the main task (the job has started). */
    void (*on_start)(void *st);
    /* A primary message is about to be written to m->peer (logging modes
     * keep a copy). */
    void (*on_send)(void *st, const phx_msg_t *m);
    /* An application frame arrived from peer; 1 drops it (stale). */
    int (*on_deliver)(void *st, int peer, const phx_frame_hdr_t *h);
    /* A PHX_FT_CTRL frame with a tag in the mode's range. */
    void (*on_ctrl)(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
    /* Optional zero-copy receive of a large PHX_FT_CTRL frame in the
     * mode's range: phx_net_cb_t.on_claim / on_claimed (net/transport.h). */
    uint8_t *(*rx_claim)(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok);
    void (*rx_claimed)(void *st, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok);
    /* Failure notice; returns 1 when the mode will recover the dead node's
     * work (the job then goes on and ends with its normal code). */
    int (*on_failure)(void *st, int rank);
    /* A checkpoint was requested (phx_checkpoint); m is the request. */
    void (*on_checkpoint)(void *st);
    /* A task was rebuilt from a checkpoint (its worker is paused). */
    void (*on_restore)(void *st, phx_tid_t tid);
    /* Worker thread, at a handler boundary while n->rec_pause is set:
     * blocks until released. lh/lt is the worker's unhandled batch. */
    void (*worker_pause)(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt);
    /* The transport (re)accepted peer with incarnation inc: a rank that
     * rejoins after being declared dead comes through here. Optional. */
    void (*on_peer_up)(void *st, int peer, uint32_t inc);
    /* The job is ending: close handles. Then destroy after the loop. */
    void (*stop)(void *st);
    void (*destroy)(void *st);
} phx_recovery_ops_t;

/* Registered modes, by name; NULL if unknown. "none" has no hooks. */
const phx_recovery_ops_t *phx_recovery_find(const char *name);
/* "none|cr|..." for help and error messages. */
const char *phx_recovery_names(void);

/* ---- wrappers the node calls (no-ops without a mode) --------------------- */
int phx_recovery_configure(phx_node_t *n);
int phx_recovery_init(phx_node_t *n);
void phx_recovery_start(phx_node_t *n);
void phx_recovery_on_send(phx_node_t *n, const phx_msg_t *m);
int phx_recovery_on_deliver(phx_node_t *n, int peer, const phx_frame_hdr_t *h);
/* 1 if h is a recovery control frame (consumed). */
int phx_recovery_on_ctrl(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
int phx_recovery_on_failure(phx_node_t *n, int rank);
void phx_recovery_on_peer_up(phx_node_t *n, int peer, uint32_t inc);
/* This process is a new incarnation of a rank that must rejoin a running
 * job (recovery=cr or mlog-*, restart-on=respawn, PHX_INCARNATION > 0): it neither
 * starts the detector nor the job at all-up; the recovery round does. */
int phx_recovery_rejoining(const phx_node_t *n);
/* This process's incarnation: PHX_INCARNATION (phx run sets it when it
 * respawns a node), else PHX_INCARNATION_FILE: a counter kept where a
 * restarted process finds it again (a container's own filesystem survives
 * a restart policy's restart; %r is replaced by the rank), read and
 * advanced at each start; else 0. 0 or a negative code after printing why. */
int phx_recovery_incarnation(int rank, uint32_t *inc);
/* phx_net_cb_t.on_claim / on_claimed with ctx = the node: routes large
 * recovery control frames to the mode's rx_claim / rx_claimed. */
uint8_t *phx_recovery_net_claim(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void **tok);
void phx_recovery_net_claimed(void *ctx, int peer, const phx_frame_hdr_t *h, const uint8_t *head, void *tok, int ok);
void phx_recovery_worker_pause(phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt);
void phx_recovery_stop(phx_node_t *n);
void phx_recovery_free(phx_node_t *n);

/* The cr mode's ops (core/ckpt.c). */
extern const phx_recovery_ops_t phx_recovery_cr;
/* A mode built on cr's state (st from phx_recovery_cr.init) hears of each
 * commit of an epoch and each rollback to one, on the comm thread while
 * every worker is paused. With partial set, the first failure of a
 * checkpoint period (or the losses phx_cr_partial_when allows) restores
 * only the dead nodes' tasks (from its buddy's copy, spread over
 * the survivors as usual) and the survivors keep their state; the mode
 * hears PHX_CR_PARTIAL at the end of that round, workers still paused,
 * and must bring the restored tasks up to date (message logging). */
/* PHX_CR_PARTIAL_BEGIN: a partial round restores here, before the first
 * task it restores (on_restore); every node of the round hears it. */
/* PHX_CR_JOINED: at a commit (after its PHX_CR_COMMIT) ranks were taken
 * back in, hosting nothing yet (restart-on=respawn after a partial round);
 * a newcomer hears it once it is a member. phx_cr_dead says who is dead. */
enum { PHX_CR_COMMIT = 1, PHX_CR_ROLLBACK = 2, PHX_CR_PARTIAL = 3, PHX_CR_PARTIAL_BEGIN = 4, PHX_CR_JOINED = 5 };
typedef void (*phx_cr_listen_fn)(void *arg, int what, uint64_t epoch);
void phx_cr_listen(void *st, phx_cr_listen_fn fn, void *arg, int partial);
/* Whether cr counts rank r dead now (comm thread). */
int phx_cr_dead(void *st, int r);
/* mlog-team: in a partial round, fn(arg, r) (comm thread; arg is the
 * listener's) says whether live rank r reloads its own copy too; the round
 * is partial only while some live rank does not. */
typedef int (*phx_cr_rolls_fn)(void *arg, int rank);
void phx_cr_partial_rolls(void *st, phx_cr_rolls_fn fn);
/* Which losses a partial round recovers: fn(arg, dead, since, replayed)
 * on the round's coordinator (comm thread; arg is the listener's) with
 * every dead rank, those dead since the round's epoch (they host slices in
 * its table) and what the live ranks restored since that epoch: nothing
 * (NONE), one partial round each, ended everywhere (ENDED: a sequential
 * loss; the partial round then moves only what the newly dead host now),
 * or anything else (OTHER: a round under way somewhere, a global one);
 * 1: partial. It must depend on nothing else, so that every
 * coordinator decides alike. Without fn: one loss, nothing replayed. */
enum { PHX_CR_REPLAYED_NONE = 0, PHX_CR_REPLAYED_ENDED = 1, PHX_CR_REPLAYED_OTHER = 2 };
typedef int (*phx_cr_partial_fn)(void *arg, const uint8_t *dead, const uint8_t *since, int replayed);
void phx_cr_partial_when(void *st, phx_cr_partial_fn fn);
/* The decided round's since set (n bytes; comm thread); returns its size. */
int phx_cr_lost_since(void *st, uint8_t *since);
/* hold = 1: the coordinator starts no checkpoint (one asked for meanwhile
 * is logged as ckpt_held and begins at hold = 0); comm thread. Message
 * logging holds them while a partial recovery's replay is under way. */
void phx_cr_hold(void *st, int hold);
/* Message logging (core/mlog.c; protocol in ft/mlog/). */
extern const phx_recovery_ops_t phx_recovery_mlog_causal, phx_recovery_mlog_pessimistic, phx_recovery_mlog_fast,
    phx_recovery_mlog_team;

#endif

/* Recovery modes (configuration key `recovery`): tables of hooks.
 *
 * The node calls the phx_recovery_* wrappers below at fixed points and
 * never tests the mode: a mode plugs in by adding its ops to the list of
 * modes core/main.c hands phx_recovery_configure. `none` has no ops (a
 * lost node's work is lost); `cr` is coordinated checkpoint/restart
 * (core/cr*.c, decisions in ft/ckpt/). The message-logging modes
 * mlog-causal, mlog-pessimistic, mlog-fast and mlog-team (core/mlog.c) are
 * layered on cr through core/cr.h. A mode's variant is its ops table:
 * nothing tests a mode's name after phx_recovery_configure found the table
 * by it.
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
typedef struct phx_task phx_task_t;

/* A node and the buddy holding its only other copy died together and no
 * disk checkpoint covers them: the job ends with this code, naming both. */
#define PHX_EXIT_CKPT_LOST 78

/* PHX_FT_CTRL tags 24..47 belong to the recovery modes: cr uses 24..39
 * (core/cr.h), message logging (core/mlog.c) 40..47. */
enum { PHX_CTRL_REC_FIRST = 24, PHX_CTRL_REC_LAST = 47 };

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
     * blocks until released. lh/lt is the worker's unhandled batch.
     * Called through phx_node_rec_hooks (core/node.h), like the worker
     * hooks below. */
    void (*worker_pause)(void *st, phx_worker_t *w, struct cds_wfcq_head *lh, struct cds_wfcq_tail *lt);
    /* This node was told to stop (why: 1 SIGTERM, 2 `phx drain`) and
     * config drain-on=term: 0 when the mode drains it (hands its work over
     * and ends the node with 0 itself), else a negative code after saying
     * why (the node then stops as before). Optional: without it, no drain. */
    int (*drain)(void *st, int why);
    /* The transport (re)accepted peer with incarnation inc: a rank that
     * rejoins after being declared dead comes through here. Optional. */
    void (*on_peer_up)(void *st, int peer, uint32_t inc);
    /* The job is ending: close handles. Then destroy after the loop. */
    void (*stop)(void *st);
    void (*destroy)(void *st);

    /* Worker hooks, each optional, run on the worker that owns the task
     * (phx_node_rec_hooks, core/node.h, finds them):
     * delivered: for every message delivered to a task, right after its
     * RSN is assigned and before its handler runs (message logging records
     * determinants (src, ssn, dst, rsn) here). */
    void (*delivered)(void *st, int worker, phx_tid_t dst, phx_tid_t src, uint64_t ssn, uint64_t rsn,
                      uint32_t inc);
    /* admit: before a message that is next in its sender's SSN stream is
     * delivered to t; nonzero holds it back (message logging replays a
     * restored task in its recorded order). Held messages are offered
     * again after each delivery to t and on a PHX_MK_KICK. Without it,
     * every in-order message is delivered. */
    int (*admit)(void *st, int worker, const phx_task_t *t, phx_tid_t src, uint64_t ssn);
    /* admit_next, beside admit: 1 and <*src, *ssn> when that is the one
     * message t may take next (a replay follows its determinants), so the
     * worker looks it up instead of offering each held one; 0 when it
     * cannot say. */
    int (*admit_next)(void *st, int worker, const phx_task_t *t, phx_tid_t *src, uint64_t *ssn);
    /* spawn: task parent spawns; id is the fresh id drawn for the child and
     * the return value the id it gets (message logging records the id and
     * gives a replayed spawn the recorded one). Without it a spawn keeps
     * its fresh id. */
    phx_tid_t (*spawn)(void *st, int worker, phx_task_t *parent, phx_tid_t id);
    /* send: before a message a handler made (send or spawn) is queued for
     * another node; never blocks (mlog-pessimistic counts it, so that a
     * pause can wait until it has left: see out_gate). */
    void (*send)(void *st, int worker);
    /* out_gate (comm thread): the outbox is about to send m (any kind but
     * PHX_MK_CALL); 1: the mode keeps it and hands it to phx_outbox_send
     * (core/outbox.h) later, every kept message in the order they came
     * (mlog-pessimistic: until the determinants made before it are stored
     * on another node). out_drained: after each drain of the outbox. */
    int (*out_gate)(void *st, phx_msg_t *m);
    void (*out_drained)(void *st);
} phx_recovery_ops_t;

/* ---- wrappers the node calls (no-ops without a mode) --------------------- */
/* phx_main, before any thread starts: the mode named by n->cfg.recovery
 * among modes[0..nmodes) (the list core/main.c keeps; "none" or empty: no
 * mode, a lost node's work is lost) becomes n->rec and checks the
 * configuration. 0, or a negative code after printing why. */
int phx_recovery_configure(phx_node_t *n, const phx_recovery_ops_t *const *modes, size_t nmodes);
int phx_recovery_init(phx_node_t *n);
void phx_recovery_start(phx_node_t *n);
void phx_recovery_on_send(phx_node_t *n, const phx_msg_t *m);
int phx_recovery_on_deliver(phx_node_t *n, int peer, const phx_frame_hdr_t *h);
/* 1 if h is a recovery control frame (consumed). */
int phx_recovery_on_ctrl(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload);
int phx_recovery_on_failure(phx_node_t *n, int rank);
void phx_recovery_on_peer_up(phx_node_t *n, int peer, uint32_t inc);
/* Asks the mode to drain this node (ops.drain); PHX_ENOTSUP without one. */
int phx_recovery_drain(phx_node_t *n, int why);
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
void phx_recovery_stop(phx_node_t *n);
void phx_recovery_free(phx_node_t *n);

/* The modes core/main.c lists: cr (core/cr*.c; its
 * interface to the modes built on it is core/cr.h) and message logging
 * (core/mlog.c; protocol in ft/mlog/). */
extern const phx_recovery_ops_t phx_recovery_cr;
extern const phx_recovery_ops_t phx_recovery_mlog_causal, phx_recovery_mlog_pessimistic, phx_recovery_mlog_fast,
    phx_recovery_mlog_team;

#endif

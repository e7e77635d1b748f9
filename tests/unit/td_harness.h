/* td_harness: discrete-event simulator of N nodes driving any phx_td_ops_t,
 * with a global oracle. Shared by test_td_ff.c (4C, EDOD, HCDA, CDA) and
 * test_td_ft.c (INDEP, RELLAZY, RELEAGER); linked as phx_td_harness.
 *
 * Use: fill a th_cfg_t (ops, n, seed, workload, budget; optionally kills),
 * call th_run(); res.ok == 0 means the oracle caught a violation, res.why
 * says which. For custom invariants pass cfg.check: it runs after every
 * event and may inspect detector states (th_state) and in-flight messages
 * (th_foreach_msg). Same cfg => same run, bit for bit.
 *
 * Model. Each step picks uniformly one enabled action:
 *   - deliver the head of a non-empty channel (src,dst). Channels are FIFO
 *     per ordered pair and carry control and primary messages together, as
 *     the runtime's TCP links do; across pairs the order is random.
 *     Primary delivery: on_recv(src, pb); the message then waits locally.
 *   - run a waiting handler: the workload draws its successors (remote
 *     ones: on_send, which may answer PHX_TD_DELAY and later env->release;
 *     local ones become local tasks), then on_processed(src), then on_idle()
 *     if the node has nothing left, else on_task_done() when provided.
 *   - run a local task (same, without on_recv/on_processed).
 *   - deliver a pending failure notice (on_failure).
 * Node 0 holds the initial task: start(1) at rank 0, start(0) elsewhere; a
 * node started with 0 is idle and gets no on_idle() for that. Messages a
 * detector holds (PHX_TD_DELAY) are its own business: on_idle() does not
 * wait for them, but the oracle counts them as pending work.
 *
 * Failures: cfg.kill[i] kills rank r once step k is reached. The dead node
 * is never called again; each of its undelivered outgoing messages is
 * dropped with probability drop_prob (or, with drop_ctl, every control
 * message); messages to it vanish on arrival.
 * Each survivor gets on_failure(r) only after every surviving message from
 * r to it was delivered (fail-flush).
 *
 * Oracle:
 *   safety   - a node declares at most once, never after fatal, and only
 *              when every live node has no waiting handler, local task or
 *              held send, and no primary message to a live node is in
 *              transit;
 *   liveness - the run must drain (no enabled action) within max_steps;
 *              then, unless some node called fatal, at least one node
 *              declared and, with cfg.live_all, every live node did (001:
 *              the final announcement reaches all P-1 others);
 *   hygiene  - release() only for a token held by that node, once; sends
 *              only to valid ranks; on_ctrl must return 0 on our messages. */
#ifndef PHX_TD_HARNESS_H
#define PHX_TD_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "ft/termination/td.h"

#define TH_MAX_NODES 64
#define TH_MAX_KILLS 8

typedef enum {
    TH_WL_TREE,    /* random spawn tree: 0..3 successors, random nodes */
    TH_WL_CHAIN,   /* one successor per task, random node */
    TH_WL_FANOUT,  /* bursts to every node, some receivers fan out again */
    TH_WL_RING,    /* token ring r -> r+1, local side leaves w.p. cfg.qb */
    TH_WL_WALK,    /* random walk: token to a uniform node, same q_b */
    TH_WL_COUNT
} th_workload_t;

typedef struct th_sim th_sim_t;

typedef struct th_cfg {
    const phx_td_ops_t *ops;
    int n;                     /* 1..TH_MAX_NODES */
    uint64_t seed;
    th_workload_t wl;
    int budget;                /* tasks the workload may create (>= 1) */
    double qb;                 /* RING/WALK branching probability (001: 0.1) */
    int live_all;              /* every live node must declare */
    uint64_t max_steps;        /* 0: 2,000,000 */
    int nkill;
    struct { int rank; uint64_t step; } kill[TH_MAX_KILLS];
    double drop_prob;          /* per undelivered message of a dead node */
    /* At a kill, every undelivered control message of the victim is lost
     * and its primaries survive: the worst loss a missing send fence lets
     * through (TCP RST on one socket, data already out on another). */
    int drop_ctl;
    /* Optional extra invariant, after every step: return 0, or nonzero
     * after writing a reason into why. */
    int (*check)(th_sim_t *sim, void *arg, char *why, size_t len);
    void *check_arg;
} th_cfg_t;

typedef struct th_result {
    int ok;                    /* 1: no violation */
    char why[256];
    int drained;
    int declared;              /* nodes that declared */
    int fatal;                 /* nodes that called fatal */
    int first_decl;            /* rank that declared first, -1 if none */
    uint64_t steps, tasks, primary, local, ctrl, ctrl_bytes, delayed, dropped;
    uint64_t ctrl_by_node[TH_MAX_NODES];   /* control messages sent */
} th_result_t;

int th_run(const th_cfg_t *cfg, th_result_t *res);

/* Step by step (th_run wraps these). th_step returns 1 after an action,
 * 0 when drained or failed; th_finish applies the liveness oracle. */
int th_create(const th_cfg_t *cfg, th_sim_t **out);
int th_step(th_sim_t *sim);
void th_finish(th_sim_t *sim, th_result_t *res);
void th_destroy(th_sim_t *sim);

/* Inspection, for cfg.check. */
void *th_state(th_sim_t *sim, int rank);     /* NULL once dead */
int th_alive(th_sim_t *sim, int rank);
int th_size(th_sim_t *sim);
/* Calls fn for every message in a channel (primary: data = piggyback). */
void th_foreach_msg(th_sim_t *sim,
                    void (*fn)(void *arg, int src, int dst, int primary,
                               const uint8_t *data, size_t len),
                    void *arg);
/* Count of sends held by the detector at rank (PHX_TD_DELAY). */
int th_held(th_sim_t *sim, int rank);
/* Calls fn for every send a live node's detector holds. */
void th_foreach_held(th_sim_t *sim, void (*fn)(void *arg, int src, int dst), void *arg);

#endif

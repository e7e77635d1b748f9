/* Termination detection: one interface, one file per algorithm.
 *
 * Model (seeds 000_* and 001_*): each node is a process of the diffusing
 * computation. A *primary* message is an application message between two
 * different nodes (node-local sends are local actions and are not reported).
 * A node is *idle* when no worker runs a task and no message waits locally.
 * The detector adds *control* (secondary) messages, which it sends through
 * env->send and receives through ops->on_ctrl.
 *
 * Threading: an instance is a pure state machine. It never blocks, never
 * allocates per primary message, never reads a clock and never touches a
 * socket. The runtime drives it from the communication thread only, so no
 * locking is needed. Unit tests drive it directly.
 *
 * Event order the runtime guarantees for one node:
 *   start() once, before anything else;
 *   on_send() before the primary message leaves (and its piggyback is
 *   written into the message);
 *   on_recv() when a primary message arrives, then exactly one
 *   on_processed() for it once its handler has returned;
 *   on_idle() whenever the node turns idle (after the last on_processed),
 *   on_busy() when an idle node turns active through local work only
 *   (never needed by the fault-free algorithms; a receive implies busy);
 *   on_ctrl() for control messages, on_failure() for failure notices
 *   (fault-tolerant algorithms; fault-free ones call env->fatal).
 * Control messages may arrive in any order relative to primary messages
 * from other nodes; channels between a pair of nodes are FIFO. */
#ifndef PHX_FT_TD_H
#define PHX_FT_TD_H

#include <stddef.h>
#include <stdint.h>

#define PHX_TD_PB_MAX   16   /* largest piggyback any algorithm writes */
#define PHX_TD_DELAY    1    /* on_send: hold the message until env->release */
#define PHX_TD_MAX_STATS 12

typedef struct phx_td_env {
    int rank;
    int size;
    void *ctx;                 /* passed back to every callback */
    /* Send a control message to node dst; bytes are copied before return. */
    void (*send)(void *ctx, int dst, const void *msg, size_t len);
    /* Termination is detected at this node. Called at most once. */
    void (*declare)(void *ctx);
    /* Termination can no longer be decided (unsurvivable failures, root
     * lost, fault-free detector saw a failure). Never followed by declare. */
    void (*fatal)(void *ctx, int code, const char *why);
    /* A send delayed by on_send (PHX_TD_DELAY) may now leave, carrying pb. */
    void (*release)(void *ctx, uint64_t token, const uint8_t *pb);
} phx_td_env_t;

typedef struct phx_td_stat {
    const char *name;          /* control message type, static string */
    uint64_t count;            /* sent by this node */
} phx_td_stat_t;

typedef struct phx_td_ops {
    const char *name;          /* "4c", "edod", "hcda", "cda", "indep", "rellazy", "releager" */
    int fault_tolerant;
    size_t pb_size;            /* piggyback bytes per primary message, <= PHX_TD_PB_MAX */

    /* Returns 0 and *out, or a negative PHX_E* code. env is copied. */
    int  (*create)(const phx_td_env_t *env, void **out);
    void (*destroy)(void *st);
    /* has_work: this node holds the initial task (exactly one node does;
     * the runtime uses rank 0). */
    void (*start)(void *st, int has_work);
    /* Returns 0 (pb written, send now) or PHX_TD_DELAY (held; token comes
     * back through env->release), or a negative code: the message cannot be
     * accounted for, and the runtime ends the job rather than send it. */
    int  (*on_send)(void *st, int dst, uint64_t token, uint8_t *pb);
    void (*on_recv)(void *st, int src, const uint8_t *pb);
    void (*on_processed)(void *st, int src);
    void (*on_idle)(void *st);
    void (*on_busy)(void *st);
    /* Returns 0, or PHX_EPROTO for a malformed message (state unchanged). */
    int  (*on_ctrl)(void *st, int src, const void *msg, size_t len);
    void (*on_failure)(void *st, int rank);
    /* Fills up to max entries, returns how many. */
    int  (*stats)(void *st, phx_td_stat_t *out, int max);
    /* Optional (NULL when unused; added for CDA, 001 §4). Called when a task
     * or handler ends and the node still has local work, i.e. exactly where
     * on_idle() would be called had it none. A detector that holds the
     * sends of a task (PHX_TD_DELAY) releases them here or in on_idle(),
     * the latter telling it the batch is terminal (all credit goes out, no
     * FLUSH). Order: on_processed(src), then on_idle() or on_task_done(). */
    void (*on_task_done)(void *st);
} phx_td_ops_t;

extern const phx_td_ops_t phx_td_4c_ops, phx_td_edod_ops, phx_td_hcda_ops,
    phx_td_cda_ops, phx_td_indep_ops, phx_td_rellazy_ops, phx_td_releager_ops;

/* Lookup by name; NULL if unknown. */
const phx_td_ops_t *phx_td_find(const char *name);

#endif

/* Phalanx public API: message-driven tasks on a fault-tolerant node runtime.
 *
 * A program registers task types, then hands control to phx_main(), which
 * starts the node (one per host or container), connects it to its peers and,
 * on rank 0, creates the main task. Tasks react to messages; each message is
 * handled by the handler registered for its tag. A task handles one message
 * at a time, so its execution is piecewise deterministic.
 *
 * Example (examples/hello/hello.c is a complete program):
 *
 *     enum { T_HELLO };
 *     static int hello_type;
 *     static void on_hello(phx_ctx_t *c, void *st, phx_tid_t src,
 *                          const void *m, size_t n)
 *     {
 *         printf("hello from rank %d\n", phx_rank(c));
 *         phx_exit(c, 0);                        // job ends everywhere
 *     }
 *     static void main_init(phx_ctx_t *c, void *st, const void *a, size_t n)
 *     {
 *         phx_tid_t t = phx_spawn_on(c, hello_type, 1 % phx_size(c), NULL, 0);
 *         phx_send(c, t, T_HELLO, NULL, 0);
 *     }
 *     int main(int argc, char **argv)
 *     {
 *         phx_type_t tt = { .name = "hello", .handlers = { [T_HELLO] = on_hello } };
 *         hello_type = phx_register_type(&tt);
 *         phx_type_t mt = { .name = "main", .init = main_init };
 *         int main_type = phx_register_type(&mt);
 *         return phx_main(argc, argv, main_type, NULL, 0);
 *     }
 *
 * Threading: handlers and init/fini run on worker threads. phx_ctx_t is only
 * valid inside the callback it was passed to. Every phx_* call below that
 * takes a ctx must be made from that callback. Registration happens in main()
 * before phx_main(), identically on every node. */
#ifndef PHALANX_H
#define PHALANX_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_err.h"   /* the PHX_E* codes the calls below return */

#ifdef __cplusplus
extern "C" {
#endif

#define PHX_MAX_TAGS 32              /* handlers per task type */
#define PHX_MAX_TYPES 64
#define PHX_TID_NONE ((phx_tid_t)0)  /* "no task": the runtime itself */

/* Task id. Bits 63..48: home node + 1; 47..32: creator node; 31..0: the
 * creator's sequence number. Placement is a function of the id: the home
 * node is chosen at spawn (hash of creator and sequence, or the override
 * given to phx_spawn_on) and is part of the id, so routing needs no lookup. */
typedef uint64_t phx_tid_t;
typedef struct phx_ctx phx_ctx_t;

typedef void (*phx_handler_fn)(phx_ctx_t *ctx, void *state, phx_tid_t src,
                               const void *msg, size_t len);

typedef struct phx_type {
    const char *name;
    size_t state_size;               /* zeroed bytes given to init */
    /* Runs on the home node when the task is created; arg is the spawn arg. */
    void (*init)(phx_ctx_t *ctx, void *state, const void *arg, size_t len);
    void (*fini)(void *state);       /* may be NULL */
    /* Pack/unpack the state for checkpoints and migration. Return bytes
     * written / 0, or a negative PHX_E* code. NULL means "state_size bytes
     * are the whole state" (plain old data). */
    int (*pack)(const void *state, void *buf, size_t cap);
    int (*unpack)(void *state, const void *buf, size_t len);
    phx_handler_fn handlers[PHX_MAX_TAGS];
    unsigned flags;                  /* PHX_TYPE_* */
} phx_type_t;

/* The type's tasks are receive-deterministic: the state after each handler
 * does not depend on the order in which messages of different tags (or
 * senders) arrive, e.g. a stencil that buffers ghosts by iteration
 * (phx_send_tagged, phx_tagbox_*). recovery=mlog-fast needs it of every
 * registered type and refuses to start otherwise. */
#define PHX_TYPE_RECV_DET 1u

/* Registers a type; returns its id (>= 0) or a negative PHX_E* code. The
 * runtime keeps a copy. Call before phx_main, in the same order everywhere. */
int phx_register_type(const phx_type_t *type);

/* Runs this node until the job ends; returns the job's exit code (what every
 * node of the job returns). Runtime options (--phx-*) are removed from argv;
 * the rest is available through phx_argc/phx_argv. Rank 0 creates the main
 * task of type main_type with arg. */
int phx_main(int argc, char **argv, int main_type, const void *arg, size_t len);
int phx_argc(void);
char **phx_argv(void);
/* Exit codes the runtime itself chooses (docs/cluster.md, "Exit codes"). */
#define PHX_EXIT_USAGE 2        /* bad command line or configuration */
/* Before phx_main, for a bad program argument: prints the printf-style
 * reason and "usage: USAGE" to stderr (on rank 0 only, so a job says it
 * once) and returns PHX_EXIT_USAGE for main to return. Arguments starting
 * with --phx- are the runtime's: skip them when checking your own. */
int phx_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a whole decimal number in [lo, hi] into *out; returns 0, or
 * PHX_EINVAL for anything else (sign, junk, overflow, out of range). */
int phx_arg_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Creates a task; returns its id (usable at once: messages sent to it are
 * delivered after its init), or PHX_TID_NONE if the type is unknown. */
phx_tid_t phx_spawn(phx_ctx_t *ctx, int type, const void *arg, size_t len);
phx_tid_t phx_spawn_on(phx_ctx_t *ctx, int type, int node, const void *arg, size_t len);

/* Sends len bytes (copied) to dst's handler for tag. Messages from one task
 * to another are delivered in send order (per-sender SSN streams). May block
 * while the destination's send buffer is full (backpressure). Returns 0 or a
 * negative PHX_E* code (PHX_EINVAL for a bad tag or dead destination node). */
int phx_send(phx_ctx_t *ctx, phx_tid_t dst, int tag, const void *buf, size_t len);

/* ---- tagged receive (recovery=mlog-fast; ft/mlog/dupf.h) -----------------
 * A tagged message carries (type, tag): type is the handler index as in
 * phx_send, tag an application number (a stencil's iteration). The
 * receiving handler passes it to its task's tag box, which drops
 * duplicates by <sender, receiver, type, tag> (a re-send during recovery)
 * and counts the messages of each tag, so a handler waits for n messages
 * of tag k by acting once phx_tagbox_count reaches n. Contract per
 * (sender, receiver, type): each tag sent once, and no tag 64 or more
 * ahead of the lowest one not yet received. The box is part of the task's
 * state: pack it with the task (phx_tagbox_pack) so a restored task knows
 * what its checkpoint had received. */
int phx_send_tagged(phx_ctx_t *ctx, phx_tid_t dst, int type, uint64_t tag, const void *buf, size_t len);
typedef struct phx_tagbox phx_tagbox_t;
/* NULL when out of memory; free with phx_tagbox_free (NULL ignored). */
phx_tagbox_t *phx_tagbox_new(void);
void phx_tagbox_free(phx_tagbox_t *b);
/* In the handler for type: decodes the tagged message msg[0..len) from src
 * (*tag, and the application's bytes *body[0..*blen)). Returns 1 (new:
 * handle it), 0 (duplicate: ignore it), PHX_EPROTO (not a tagged message),
 * PHX_ERANGE (the window contract broken) or PHX_ENOMEM. */
int phx_tagbox_recv(phx_ctx_t *ctx, phx_tagbox_t *b, phx_tid_t src, int type, const void *msg, size_t len,
                    uint64_t *tag, const void **body, size_t *blen);
/* Messages of (type, tag) received so far (duplicates not counted). */
int phx_tagbox_count(phx_ctx_t *ctx, const phx_tagbox_t *b, int type, uint64_t tag);
/* Duplicates dropped by this box in this process. */
uint64_t phx_tagbox_dups(const phx_tagbox_t *b);
/* Pack/unpack for the owner's pack callbacks: bytes written or
 * PHX_ENOSPC; 0 or PHX_EPROTO / PHX_ENOMEM. */
size_t phx_tagbox_size(const phx_tagbox_t *b);
int phx_tagbox_pack(const phx_tagbox_t *b, void *buf, size_t cap);
int phx_tagbox_unpack(phx_tagbox_t *b, const void *buf, size_t len);

/* Asks for a coordinated checkpoint (recovery=cr) once the calling handler
 * returns: a sync point chosen by the program. Returns at once; a request
 * made while one is running is dropped. No-op without a checkpointing
 * recovery mode. Pack callbacks return PHX_ENOSPC when cap is too small:
 * the runtime retries with a larger buffer. */
void phx_checkpoint(phx_ctx_t *ctx);

/* Ends the job on every node with this code, once the handler returns. */
void phx_exit(phx_ctx_t *ctx, int code);
/* Destroys the calling task once the handler returns (fini runs then). */
void phx_task_done(phx_ctx_t *ctx);

phx_tid_t phx_self(const phx_ctx_t *ctx);
int phx_rank(const phx_ctx_t *ctx);
int phx_size(const phx_ctx_t *ctx);
int phx_worker(const phx_ctx_t *ctx);
/* Home node of a task id. */
int phx_tid_home(phx_tid_t tid);
/* Monotonic nanoseconds. */
uint64_t phx_now_ns(void);

/* ---- failures (fault tolerance on: --phx-ft) ----------------------------
 * A failure notice says node `node` (incarnation inc) is dead for good; every
 * survivor gets the same notices (perfect-detector semantics). */
typedef void (*phx_failure_fn)(void *arg, int node, uint32_t inc, uint64_t when_ns);
/* Registers fn, called on the communication thread for each notice: keep it
 * short and non-blocking, and do not call phx_send from it. Call before
 * phx_main; at most 8 callbacks. Registering one says that the program
 * handles failures itself: a job that saw nodes die may then end with 0.
 * Without it (and without a recovery mode) such a job ends with 76, work
 * lost, since the dead nodes' tasks are gone. */
int phx_on_failure(phx_failure_fn fn, void *arg);
/* Drain (config drain-on=term: SIGTERM or `phx drain RANK`) under a
 * recovery mode that drains nothing: fn is called on the communication
 * thread (keep it short, no phx_send: set a flag the program's tasks
 * poll). Returning 0 says the program hands this node's work over itself
 * and then calls phx_leave; anything else stops the node as a signal
 * does. why: 1 SIGTERM, 2 `phx drain`. Call before phx_main. */
typedef int (*phx_drain_fn)(void *arg, int why);
int phx_on_drain(phx_drain_fn fn, void *arg);
/* From a handler, after a drain handed this node's work over: ends this
 * node alone with 0 once the handler returns. The others then get its
 * failure notice (the runtime's membership counts it out like a loss), so
 * the program must already have told them what it handed over. */
void phx_leave(phx_ctx_t *ctx);
/* Any thread: copies up to cap dead nodes, in notice order; returns how many
 * are dead. */
int phx_failed_nodes(int *out, int cap);
/* Any thread: acknowledges every failure known now (ULFM failure_ack), so
 * later ones can be told apart; returns the number acknowledged. One state
 * per node, shared with agreements and groups: phx_agree and phx_shrink
 * report only failures some contributor had not acknowledged, and
 * acknowledge what they report. */
int phx_failure_ack(void);
/* Any thread: failures noticed but not yet acknowledged. */
int phx_failures_unacked(void);

/* Job-wide counters of this node, readable at any time (approximate while
 * running). */
typedef struct phx_stats {
    uint64_t msgs_sent, msgs_recv;        /* application messages */
    uint64_t bytes_sent, bytes_recv;
    uint64_t tasks_created, deliveries;   /* deliveries == RSNs assigned */
    uint64_t reordered;                   /* held back to restore SSN order */
    uint64_t td_ctrl_msgs;                /* termination detection overhead */
} phx_stats_t;
void phx_get_stats(phx_ctx_t *ctx, phx_stats_t *out);

/* Reports this node's progress: done units of total (total 0: unknown).
 * Any task; the latest call on a node wins, so report node-wide figures.
 * Cheap enough to call every iteration: it stores two relaxed atomics and
 * writes a "progress" event-log line at most every 20 ms. phx run shows the
 * sum over the nodes with a rate and an ETA; /metrics exports it
 * (phx_progress_done, phx_progress_target); tools/timeline plots it. */
void phx_progress(phx_ctx_t *ctx, uint64_t done, uint64_t total);

/* ---- agreement and groups (ERA, ft/era/era.h) ----------------------------
 * ULFM-style collectives over groups of nodes. A group is a sorted set of
 * ranks; the world group holds every rank of the job. Handles are owned by
 * the runtime and stay valid until phx_main returns.
 *
 * Calling rules (as for MPI collectives): on each member node exactly ONE
 * task calls the collectives of a given group, and every member calls them
 * in the same order (agree, shrink and allreduce share that order). Each call
 * blocks the calling worker thread only (other workers and the communication
 * thread keep running) until the operation completes, so do not call two
 * collectives of one group from tasks that depend on each other's messages.
 * Agreement ids are assigned per group in call order. When the job ends
 * while a call is blocked, it returns PHX_ECANCELED.
 *
 * Failures: only with fault tolerance on (--phx-ft). phx_agree and
 * phx_shrink tolerate any number of member failures, before or during the
 * call; phx_allreduce does not (it fails, and the recovery is revoke +
 * agree/shrink). */
typedef struct phx_group phx_group_t;

enum { PHX_OP_AND = 0, PHX_OP_OR = 1, PHX_OP_MIN = 2, PHX_OP_MAX = 3 };  /* MIN/MAX unsigned */

/* The group of all ranks. Any thread, once phx_main started; NULL before. */
phx_group_t *phx_group_world(void);
/* Any thread: number of members, index of this node among them, and a copy
 * of up to cap member ranks in increasing order (returns the size). */
int phx_group_size(const phx_group_t *g);
int phx_group_rank(const phx_group_t *g);
int phx_group_members(const phx_group_t *g, int *out, int cap);
/* Any thread: 1 once this node knows g is revoked. */
int phx_group_revoked(const phx_group_t *g);

/* Fault-tolerant agreement (ERA) over the live members of g: *value is this
 * node's contribution and, on return, the decided value op-reduced over the
 * contributions that made the decision (a member that died during the call
 * may or may not be included; the choice is the same everywhere). Every
 * surviving member returns the same *value, the same failed set
 * (phx_agree_failed) and the same code:
 *   0              every member failure known to the decision had been
 *                  acknowledged by every contributor (phx_failure_ack, or an
 *                  earlier agreement or shrink on any group);
 *   PHX_EPROCFAIL  some had not; this agreement acknowledges them all
 *                  (the new ones listed by phx_agree_failed), so later
 *                  agreements no longer report them;
 *   PHX_EREVOKED   no new failure, but some contributor had seen g revoked
 *                  (agreement still works on a revoked group, as in ULFM).
 * *value is defined for all three. Other negative codes (PHX_EINVAL,
 * PHX_ECANCELED, PHX_ENOMEM) mean no agreement took place. */
int phx_agree(phx_ctx_t *ctx, phx_group_t *g, uint64_t *value, int op);
/* The failures the calling node's last phx_agree or phx_shrink on g
 * acknowledged (new to this node), in increasing rank order, the same at
 * every survivor unless nodes called phx_failure_ack at different points:
 * copies up to cap ranks into out and returns their number. Call
 * from the task that makes g's collective calls. */
int phx_agree_failed(phx_ctx_t *ctx, phx_group_t *g, int *out, int cap);
/* Revokes g: every surviving member learns it (phx_group_revoked), its
 * pending and future phx_allreduce calls on g fail with PHX_EREVOKED, and
 * agreements on g return PHX_EREVOKED unless they report new failures.
 * Does not block for the others; returns 0 or a negative code. Any task. */
int phx_revoke(phx_ctx_t *ctx, phx_group_t *g);
/* Agrees on the dead members of g and builds the group of the others:
 * every survivor gets the same members and group id. Works on revoked
 * groups; the new group is not revoked. Returns 0 (and *out) or a negative
 * code; the failures it acknowledged are given by phx_agree_failed(g). */
int phx_shrink(phx_ctx_t *ctx, phx_group_t *g, phx_group_t **out);
/* Plain allreduce (binomial-tree reduce to the first member, then the same
 * tree down): NOT fault tolerant. Same calling rules and op as phx_agree.
 * Returns 0, PHX_EPROCFAIL (a member of g is known dead: the call gives up,
 * possibly at some members only -- recover with revoke + shrink),
 * PHX_EREVOKED, or another negative code. */
int phx_allreduce(phx_ctx_t *ctx, phx_group_t *g, uint64_t *value, int op);

/* Fault injection for tests (tests/integration/test_agree.sh): this node
 * raises SIGKILL on its communication thread at agreement number k (0-based,
 * call order) on the world group, at point:
 *   PHX_AGREE_DIE_SENT     once its first frame of that agreement (its
 *                          contribution; the decision for the root) has
 *                          been written to the socket;
 *   PHX_AGREE_DIE_DECIDED  on learning the decision, before forwarding it
 *                          or returning it.
 * Call before phx_main. Returns 0 or PHX_EINVAL. */
enum { PHX_AGREE_DIE_SENT = 1, PHX_AGREE_DIE_DECIDED = 2 };
int phx_agree_debug_die(uint64_t k, int point);

#ifdef __cplusplus
}
#endif

#endif

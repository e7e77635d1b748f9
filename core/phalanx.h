/* Phalanx public API: message-driven tasks on a fault-tolerant node runtime.
 *
 * A program registers task types, then hands control to phx_main(), which
 * starts the node (one per host or container), connects it to its peers and,
 * on rank 0, creates the main task. Tasks react to messages; each message is
 * handled by the handler registered for its tag. A task handles one message
 * at a time, so its execution is piecewise deterministic.
 *
 * Example (apps/hello.c):
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
} phx_type_t;

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

/* Creates a task; returns its id (usable at once: messages sent to it are
 * delivered after its init), or PHX_TID_NONE if the type is unknown. */
phx_tid_t phx_spawn(phx_ctx_t *ctx, int type, const void *arg, size_t len);
phx_tid_t phx_spawn_on(phx_ctx_t *ctx, int type, int node, const void *arg, size_t len);

/* Sends len bytes (copied) to dst's handler for tag. Messages from one task
 * to another are delivered in send order (per-sender SSN streams). May block
 * while the destination's send buffer is full (backpressure). Returns 0 or a
 * negative PHX_E* code (PHX_EINVAL for a bad tag or dead destination node). */
int phx_send(phx_ctx_t *ctx, phx_tid_t dst, int tag, const void *buf, size_t len);

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
 * phx_main; at most 8 callbacks. */
int phx_on_failure(phx_failure_fn fn, void *arg);
/* Any thread: copies up to cap dead nodes, in notice order; returns how many
 * are dead. */
int phx_failed_nodes(int *out, int cap);
/* Any thread: acknowledges every failure known now (ULFM failure_ack), so
 * later ones can be told apart; returns the number acknowledged. */
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

#endif

/* ERA: Early Returning Agreement (as presented in
 * "Fault tolerant algorithms for a fault tolerant MPI" (Herault)), the engine behind
 * agree / shrink in the ULFM-style API of group.h.
 *
 * Threading: an era instance is a pure state machine. It never blocks,
 * never reads a clock, never touches a socket or a thread. The runtime
 * drives it from ONE thread (the communication thread); no call is
 * thread-safe against another call on the same instance. Distinct instances
 * are independent.
 *
 * Callbacks (env) are invoked synchronously from inside start / on_msg /
 * on_failure / revoke / shrink. `send` may be called at any point of a call;
 * decided / shrunk / revoked are queued and delivered at the end of the
 * outermost call, so they MAY re-enter the instance (e.g. start the next
 * agreement from `decided`), but must not destroy it.
 *
 * Model the runtime must provide (the same talk, "Formal Framework"):
 *  - FIFO, lossless links per pair while both ends live;
 *  - a perfect failure detector: on_failure(r) only for a dead r, and every
 *    survivor eventually gets it for every dead member;
 *  - after on_failure(r) returned, the transport hands nothing more from r
 *    to on_msg (messages already queued from r may be delivered before it).
 */
#ifndef PHX_FT_ERA_H
#define PHX_FT_ERA_H

#include <stddef.h>
#include <stdint.h>

#define PHX_FT_ERA_VAL_WORDS 16                   /* 1024-bit values */
/* Job size limit of the engine (create, agree, failure notices, shrink):
 * rank sets are bitsets of this many bits; the wire carries only the job's
 * words. */
#define PHX_FT_ERA_ENGINE_MAX_RANKS 65536
#define PHX_FT_RANKSET_WORDS (PHX_FT_ERA_ENGINE_MAX_RANKS / 64)
/* Job size limit of ERA with shrink, which core/agree.c enforces at startup
 * with fault tolerance on (saying so). A shrink agrees on the decision's
 * failed set (a rank set), not on a value, so it is the engine's limit
 * (it used to be the 1024-bit value width, when shrink carried the set as
 * its value). */
#define PHX_FT_ERA_MAX_RANKS PHX_FT_ERA_ENGINE_MAX_RANKS

typedef struct phx_ft_era phx_ft_era_t;
typedef struct phx_ft_group phx_ft_group_t;      /* see group.h */

/* Agreement value: nwords 64-bit words, op applied per word. Words at index
 * >= nwords are ignored and always read back as zero. Plain value type. */
typedef struct phx_ft_era_value {
    uint32_t nwords;                              /* 1..PHX_FT_ERA_VAL_WORDS */
    uint64_t w[PHX_FT_ERA_VAL_WORDS];
} phx_ft_era_value_t;

/* Set of job ranks, bit r = rank r. Plain value type. */
typedef struct phx_ft_rankset {
    uint64_t w[PHX_FT_RANKSET_WORDS];
} phx_ft_rankset_t;

/* Reduction operators: associative, commutative, idempotent, with a
 * neutral element (all-ones for AND/MIN, zero for OR/MAX). AND is 0 so a
 * zeroed request means the ULFM default. */
typedef enum phx_ft_era_op {
    PHX_FT_ERA_AND = 0,
    PHX_FT_ERA_OR  = 1,
    PHX_FT_ERA_MIN = 2,   /* unsigned, per word */
    PHX_FT_ERA_MAX = 3,   /* unsigned, per word */
} phx_ft_era_op_t;

typedef struct phx_ft_era_env {
    void *ctx;            /* handed back to every callback, not owned */
    /* Send len bytes to rank dst; bytes must be copied before return.
     * A negative return is propagated out of the driving call; the state
     * machine still counts the message as sent (a dead destination is
     * reported later through on_failure, which repairs the tree). Required. */
    int (*send)(void *ctx, int dst, const void *buf, size_t len);
    /* Agreement (gid, aid) decided here, exactly once per started agreement.
     * value, failed and rc are identical at every surviving member:
     *   failed = group members known dead by the contributions that made the
     *            decision (union); the failures this agreement acknowledges;
     *   rc     = PHX_OK, or PHX_EPROCFAIL if `failed` holds a rank that not
     *            every contributor had acknowledged (phx_ft_ulfm_failure_ack)
     *            before starting.
     * Pointers are valid during the call only. Not called for shrink
     * agreements (see shrunk). Required. */
    void (*decided)(void *ctx, uint64_t gid, uint64_t aid,
                    const phx_ft_era_value_t *value,
                    const phx_ft_rankset_t *failed, int rc);
    /* Group gid got revoked here (first time only). Optional. */
    void (*revoked)(void *ctx, uint64_t gid);
    /* Shrink (gid, aid) finished: newg is the new group, owned by the era,
     * identical members and id at every survivor. Optional unless shrink is
     * used. failed/rc as for decided. */
    void (*shrunk)(void *ctx, uint64_t gid, uint64_t aid, phx_ft_group_t *newg,
                   const phx_ft_rankset_t *failed, int rc);
    unsigned arity;       /* tree fan-out; 0 = 2 */
    unsigned history_max; /* decided agreements kept per era beyond GC; 0 = 256 */
} phx_ft_era_env_t;

/* Create the engine for this process (rank in 0..n-1, n <= MAX_RANKS).
 * env is copied. Returns 0 or PHX_EINVAL / PHX_ENOMEM. The caller owns *out. */
int  phx_ft_era_create(const phx_ft_era_env_t *env, int rank, int n, phx_ft_era_t **out);
/* Frees the engine and every group it owns. NULL is fine. */
void phx_ft_era_destroy(phx_ft_era_t *era);

/* Contribute `value` to agreement aid on group g (which must belong to era).
 * aids on one group must be started in increasing order, the same sequence
 * at every member (program order); several may be in flight.
 * Returns 0; PHX_EINVAL (bad op/value, aid not increasing, op or width
 * differing from what peers already sent); PHX_ENOMEM; or a send error. */
int  phx_ft_era_start(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid,
                      const phx_ft_era_value_t *value, phx_ft_era_op_t op);

/* A message from rank src. Returns 0, PHX_EPROTO (malformed or
 * inconsistent; state unchanged), or a send error. Messages from ranks
 * already reported dead are ignored. buf is not retained. */
int  phx_ft_era_on_msg(phx_ft_era_t *era, int src, const void *buf, size_t len);

/* Failure notice for rank (any time, idempotent). Returns 0, PHX_EINVAL
 * (out of range), PHX_EFENCED (rank == self: nothing changed), or a send
 * error. */
int  phx_ft_era_on_failure(phx_ft_era_t *era, int rank);

/* The type of an encoded message, for counting it (any thread, no era
 * needed): PHX_FT_ERA_MSG_UP / _DECIDE / _REVOKE, or 0 for anything else. */
enum { PHX_FT_ERA_MSG_UP = 1, PHX_FT_ERA_MSG_DECIDE = 2, PHX_FT_ERA_MSG_REVOKE = 3 };
int  phx_ft_era_msg_type(const void *buf, size_t len);
/* The same and the agreement it belongs to (group gid, agreement aid):
 * 0, or PHX_EPROTO where phx_ft_era_msg_type says 0. */
typedef struct phx_ft_era_peek {
    int type;
    uint64_t gid, aid;
} phx_ft_era_peek_t;
int  phx_ft_era_msg_peek(const void *buf, size_t len, phx_ft_era_peek_t *out);

/* Read-only views; valid until the next mutating call. */
const phx_ft_rankset_t *phx_ft_era_dead(const phx_ft_era_t *era);
/* Agreements started but not decided here, and decisions kept for late
 * requesters (diagnostics, tests). */
size_t phx_ft_era_pending(const phx_ft_era_t *era);
size_t phx_ft_era_history(const phx_ft_era_t *era);

/* Value / rank-set helpers (pure). */
void phx_ft_era_value_u64(phx_ft_era_value_t *v, uint64_t x);   /* nwords=1 */
static inline int phx_ft_rankset_test(const phx_ft_rankset_t *s, int r)
{
    return (int)((s->w[(unsigned)r >> 6] >> ((unsigned)r & 63)) & 1u);
}
static inline void phx_ft_rankset_add(phx_ft_rankset_t *s, int r)
{
    s->w[(unsigned)r >> 6] |= (uint64_t)1 << ((unsigned)r & 63);
}
int  phx_ft_rankset_count(const phx_ft_rankset_t *s);

#endif

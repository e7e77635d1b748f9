/* Lock-free determinant queue ("Scalable Message-Logging Techniques for Effective Fault Tolerance in HPC Applications" (Meneses),
 * section 7.2, Fig. 7.4b, Alg. 22-24).
 *
 * A determinant <sender, ssn, receiver, rsn> is made at every delivery and
 * must ride on every message leaving the node until another node has
 * acknowledged it. Entries move E (empty) -> R (reserved: a producer fills
 * it) -> P (published: piggybacked) -> A (acknowledged). Three monotonic
 * 64-bit indices: `start` (first P), `end` (one past the last P), `next`
 * (first E); start <= end <= next always. [start, end) is contiguous and
 * filled: a producer publishes only after every earlier reservation did,
 * so if det i was exported, every det < i was exported or acked (the
 * prefix property recovery relies on: no per-task rsn gaps).
 *
 * Capacity: a ring of cap entries (a power of two). A producer whose slot
 * still holds an unacknowledged entry blocks (yielding) until acks free it,
 * calling the queue's `full` callback once per wait so the owner can force
 * a determinant flush; it never overwrites. phx_detq_close releases blocked
 * producers with PHX_ECANCELED (the job is ending).
 *
 * Threads: phx_detq_add from any number of producer threads (in the runtime,
 * the workers). phx_detq_piggyback, phx_detq_copy, phx_detq_ack and
 * phx_detq_reset from one consumer thread (the comm thread): `start` then
 * has one writer and slots in [start, end) cannot be reused while copied.
 * phx_detq_ack is nevertheless a CAS-max, so a second acking thread cannot
 * move `start` backwards. */
#ifndef PHX_FT_MLOG_DETQ_H
#define PHX_FT_MLOG_DETQ_H

#include <stdint.h>

/* 32 bytes: fixed size so the ring is a plain array. */
typedef struct phx_det {
    uint64_t sender;            /* task id of the sender (0: the runtime) */
    uint64_t receiver;          /* task id of the receiver */
    uint64_t ssn;               /* sender's sequence number towards receiver */
    uint64_t rsn;               /* receiver's delivery number */
} phx_det_t;

typedef struct phx_detq phx_detq_t;

/* Called by a producer (on its own thread) when it must wait for room. */
typedef void (*phx_detq_full_fn)(void *arg);

/* cap: a power of two >= 2. inc: the owner node's incarnation; acks carry
 * it. Returns NULL when out of memory or cap is not a power of two. */
phx_detq_t *phx_detq_create(uint32_t cap, uint32_t inc, phx_detq_full_fn full, void *arg);
void phx_detq_destroy(phx_detq_t *q);

/* Producer: reserve, fill, publish in reservation order. Returns the index
 * of the det (>= 0), or PHX_ECANCELED after phx_detq_close. */
int64_t phx_detq_add(phx_detq_t *q, const phx_det_t *d);
/* The same in three steps (a producer that wants its index inside the
 * entry, and the tests of ordered publication): reserve returns the index
 * (blocking while the ring is full) or PHX_ECANCELED; slot is the entry to
 * fill; publish waits for every earlier index, then exposes t. Each
 * reserved index must be published exactly once, by its reserver. */
int64_t phx_detq_reserve(phx_detq_t *q);
phx_det_t *phx_detq_slot(phx_detq_t *q, uint64_t t);
int phx_detq_publish(phx_detq_t *q, uint64_t t);

/* Consumer: the published, unacknowledged range [*first, *end); returns its
 * length (0: nothing to piggyback). end is read before start (acquire), so
 * the range is filled; a later call gives a superset minus what was acked. */
uint64_t phx_detq_piggyback(phx_detq_t *q, uint64_t *first, uint64_t *end);
/* Consumer: copies entries [first, first+n) into out. They must lie in a
 * range phx_detq_piggyback returned and not be acked since. */
void phx_detq_copy(const phx_detq_t *q, uint64_t first, uint64_t n, phx_det_t *out);
/* Consumer: another node stored every det below `end` (exclusive) of the
 * queue's incarnation inc. Returns 1 if start moved; 0 for a stale ack (an
 * old incarnation, an index at or below start, or beyond what was
 * published: a confused peer must not free unexported slots). */
int phx_detq_ack(phx_detq_t *q, uint32_t inc, uint64_t end);
/* Consumer, with no producer running: empties the queue for a new
 * incarnation (a restarted node). Acks of the old one are then ignored. */
void phx_detq_reset(phx_detq_t *q, uint32_t inc);
/* Any thread: blocked and later producers return PHX_ECANCELED. */
void phx_detq_close(phx_detq_t *q);

/* Any thread (relaxed snapshots, for invariants, tests and counters). */
typedef struct phx_detq_stat {
    uint64_t start, end, next;
    uint64_t waits;             /* times a producer blocked on a full ring */
    uint32_t inc, cap;
} phx_detq_stat_t;
void phx_detq_stat(const phx_detq_t *q, phx_detq_stat_t *out);

#endif

/* Lock-free determinant queue: see detq.h for the contract. */
#include "ft/mlog/detq.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/phx_err.h"

#define LINE 64

struct phx_detq {
    /* Each index on its own cache line: producers hammer `next` and `end`,
     * the consumer writes `start`. */
    _Alignas(LINE) _Atomic uint64_t next;
    _Alignas(LINE) _Atomic uint64_t end;
    _Atomic uint32_t sleepers;  /* producers parked on end's futex */
    _Alignas(LINE) _Atomic uint64_t start;
    _Alignas(LINE) _Atomic uint32_t inc;
    _Atomic int closed;
    _Atomic uint64_t waits;
    uint32_t cap;
    phx_detq_full_fn full;
    void *arg;
    phx_det_t *ring;
};

phx_detq_t *phx_detq_create(uint32_t cap, uint32_t inc, phx_detq_full_fn full, void *arg)
{
    if (cap < 2 || (cap & (cap - 1)))
        return NULL;
    phx_detq_t *q = aligned_alloc(LINE, sizeof *q);
    if (!q)
        return NULL;
    memset(q, 0, sizeof *q);
    q->ring = calloc(cap, sizeof *q->ring);
    if (!q->ring) {
        free(q);
        return NULL;
    }
    q->cap = cap;
    q->full = full;
    q->arg = arg;
    atomic_init(&q->inc, inc);
    return q;
}

void phx_detq_destroy(phx_detq_t *q)
{
    if (!q)
        return;
    free(q->ring);
    free(q);
}

/* A waiting producer spins (a running filler publishes within a few
 * hundred ns), then yields: in an oversubscribed container the thread it
 * waits for may hold no core. */
static inline void backoff(unsigned *spins)
{
    if (++*spins < 1024) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#else
        __asm__ __volatile__("" ::: "memory");
#endif
    } else
        sched_yield();
}

int64_t phx_detq_reserve(phx_detq_t *q)
{
    uint64_t t = atomic_fetch_add_explicit(&q->next, 1, memory_order_relaxed);
    unsigned spins = 0;
    int told = 0;
    /* Slot t still holds det t - cap until that one is acknowledged. The
     * acquire pairs with the consumer's release in ack: its copy of the old
     * entry is finished before we overwrite it. */
    while (t - atomic_load_explicit(&q->start, memory_order_acquire) >= q->cap) {
        if (atomic_load_explicit(&q->closed, memory_order_relaxed))
            return PHX_ECANCELED;
        if (!told) {
            told = 1;
            atomic_fetch_add_explicit(&q->waits, 1, memory_order_relaxed);
            if (q->full)
                q->full(q->arg);
        }
        backoff(&spins);
    }
    return (int64_t)t;
}

phx_det_t *phx_detq_slot(phx_detq_t *q, uint64_t t)
{
    return &q->ring[t & (q->cap - 1)];
}

/* The low 32 bits of end, as a futex word (little-endian x86/arm). */
static uint32_t *end_word(phx_detq_t *q)
{
    return (uint32_t *)(void *)&q->end;
}

int phx_detq_publish(phx_detq_t *q, uint64_t t)
{
    /* Publish strictly in reservation order (Alg. 22's spin). A producer
     * preempted between reserve and publish stalls every later one; on an
     * oversubscribed box yielding alone turns that into a convoy of
     * yielders, so after spinning a waiter parks on end's futex and the
     * publisher wakes the parked ones (1 ms timeout: close() needs no
     * wake-up of its own). */
    unsigned spins = 0;
    uint64_t e;
    while ((e = atomic_load_explicit(&q->end, memory_order_acquire)) != t) {
        if (atomic_load_explicit(&q->closed, memory_order_relaxed))
            return PHX_ECANCELED;
        if (spins < 1024) {
            backoff(&spins);   /* counts; pauses below 1024 */
            continue;
        }
        atomic_fetch_add_explicit(&q->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&q->end, memory_order_seq_cst) == e) {
            struct timespec ts = { 0, 1000000 };
            syscall(SYS_futex, end_word(q), FUTEX_WAIT_PRIVATE, (uint32_t)e, &ts, NULL, 0);
        }
        atomic_fetch_sub_explicit(&q->sleepers, 1, memory_order_relaxed);
    }
    /* Only the owner of t can move end past t. seq_cst pairs with the
     * sleepers' increment then re-check (Dekker): either they see the new
     * end or we see them and wake them. */
    atomic_store_explicit(&q->end, t + 1, memory_order_seq_cst);
    if (atomic_load_explicit(&q->sleepers, memory_order_seq_cst))
        syscall(SYS_futex, end_word(q), FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    return 0;
}

int64_t phx_detq_add(phx_detq_t *q, const phx_det_t *d)
{
    int64_t t = phx_detq_reserve(q);
    if (t < 0)
        return t;
    q->ring[(uint64_t)t & (q->cap - 1)] = *d;
    int rc = phx_detq_publish(q, (uint64_t)t);
    return rc < 0 ? rc : t;
}

uint64_t phx_detq_piggyback(phx_detq_t *q, uint64_t *first, uint64_t *end)
{
    /* end before start (Alg. 23): a range read the other way round could
     * include slots acked and reused in between. */
    uint64_t e = atomic_load_explicit(&q->end, memory_order_acquire);
    uint64_t s = atomic_load_explicit(&q->start, memory_order_relaxed);
    if (s > e)
        s = e;
    *first = s;
    *end = e;
    return e - s;
}

void phx_detq_copy(const phx_detq_t *q, uint64_t first, uint64_t n, phx_det_t *out)
{
    uint64_t mask = q->cap - 1;
    uint64_t i = first & mask;
    uint64_t k = n < q->cap - i ? n : q->cap - i;
    memcpy(out, &q->ring[i], k * sizeof *out);
    if (k < n)
        memcpy(out + k, q->ring, (n - k) * sizeof *out);
}

int phx_detq_ack(phx_detq_t *q, uint32_t inc, uint64_t end)
{
    if (inc != atomic_load_explicit(&q->inc, memory_order_relaxed))
        return 0;
    if (end > atomic_load_explicit(&q->end, memory_order_acquire))
        return 0;
    uint64_t cur = atomic_load_explicit(&q->start, memory_order_relaxed);
    while (end > cur)
        if (atomic_compare_exchange_weak_explicit(&q->start, &cur, end, memory_order_release,
                                                  memory_order_relaxed))
            return 1;
    return 0;
}

void phx_detq_reset(phx_detq_t *q, uint32_t inc)
{
    atomic_store(&q->inc, inc);
    atomic_store(&q->next, 0);
    atomic_store(&q->end, 0);
    atomic_store(&q->start, 0);
    atomic_store(&q->closed, 0);
}

void phx_detq_close(phx_detq_t *q)
{
    atomic_store(&q->closed, 1);
}

void phx_detq_stat(const phx_detq_t *q, phx_detq_stat_t *o)
{
    /* start, end, next in that order: each is monotonic, so the snapshot
     * keeps start <= end <= next. */
    o->start = atomic_load_explicit(&q->start, memory_order_acquire);
    o->end = atomic_load_explicit(&q->end, memory_order_acquire);
    o->next = atomic_load_explicit(&q->next, memory_order_acquire);
    o->waits = atomic_load_explicit(&q->waits, memory_order_relaxed);
    o->inc = atomic_load_explicit(&q->inc, memory_order_relaxed);
    o->cap = q->cap;
}

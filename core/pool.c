#include "msg.h"

#include <stdlib.h>
#include <string.h>

#define NCLASS 4
static const uint32_t class_cap[NCLASS] = { 64, 512, 8192, 65536 };
static const uint32_t class_keep[NCLASS] = { 8192, 2048, 128, 16 };

struct phx_pool {
    phx_msg_t *free[NCLASS];               /* owner thread only */
    uint32_t nfree[NCLASS];                /* about: see phx_msg_alloc */
    _Atomic(phx_msg_t *) remote[NCLASS];   /* pushed by others, drained by owner */
    _Atomic uint32_t nremote[NCLASS];      /* messages pushed to remote[], about */
};

static _Thread_local phx_pool_t *cur_pool;

#ifdef PHX_TSAN
/* Built in rather than passed through TSAN_OPTIONS, so they hold wherever
 * the binary runs (containers included). liburcu's queues synchronise with
 * volatile accesses and explicit barriers that TSan does not model; every
 * message handed through them is annotated with __tsan_release/acquire
 * (msg.h), so races on payloads still report. Only the queue internals are
 * silenced. This file is linked into every program that uses the queues. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "race:_cds_wfcq_empty\n"
           "race:___cds_wfcq_append\n"
           "race:___cds_wfcq_splice\n"
           "race:___cds_wfcq_dequeue_with_state\n"
           "race:___cds_wfcq_node_sync_next\n"
           "race:___cds_wfcq_first\n"
           "race:___cds_wfcq_next\n"
           "race:__cds_wfcq_splice_blocking\n"
           "race:__cds_wfcq_dequeue_blocking\n"
           "race:_cds_wfcq_enqueue\n";
}
#endif

/* Remote frees are gathered per (owner, class) and pushed as one chain:
 * one CAS per batch instead of one per message. phx_pool_flush pushes
 * them; the threads call it at the end of each batch they process. */
#define NDEFER 4
typedef struct defer {
    phx_pool_t *owner;
    int cls;
    uint32_t n;
    phx_msg_t *head, *tail;
} defer_t;
static _Thread_local defer_t deferred[NDEFER];

/* The free-list link reuses the queue node's next pointer: a message on a
 * free list is on no queue. */
static inline phx_msg_t *next_of(phx_msg_t *m) { return (phx_msg_t *)m->qn.next; }
static inline void set_next(phx_msg_t *m, phx_msg_t *x) { m->qn.next = x ? &x->qn : NULL; }

phx_pool_t *phx_pool_create(void)
{
    phx_pool_t *p = calloc(1, sizeof *p);
    if (p)
        cur_pool = p;
    return p;
}

static void free_chain(phx_msg_t *m)
{
    while (m) {
        phx_msg_t *n = next_of(m);
        free(m);
        m = n;
    }
}

void phx_pool_destroy(phx_pool_t *p)
{
    if (!p)
        return;
    phx_pool_flush();
    for (int c = 0; c < NCLASS; c++) {
        free_chain(p->free[c]);
        free_chain(atomic_exchange(&p->remote[c], NULL));
    }
    if (cur_pool == p)
        cur_pool = NULL;
    free(p);
}

static int class_of(size_t len)
{
    for (int c = 0; c < NCLASS; c++)
        if (len <= class_cap[c])
            return c;
    return -1;
}

phx_msg_t *phx_msg_alloc(size_t len)
{
    if (len > UINT32_MAX)
        return NULL;
    phx_pool_t *p = cur_pool;
    int c = class_of(len);
    phx_msg_t *m = NULL;
    if (p && c >= 0) {
        m = p->free[c];
        if (!m) {
            /* acquire pairs with the pushers' release: their writes to the
             * messages' memory happen-before our reuse. */
            m = atomic_exchange_explicit(&p->remote[c], NULL, memory_order_acquire);
            /* The count comes from the pushers, not from walking the chain:
             * a walk touched every returned buffer once more, cold (one
             * chain can hold a whole send buffer's worth). A push between
             * the two exchanges makes it off by that chain for a while;
             * it only bounds what the free list keeps. */
            p->free[c] = m;
            p->nfree[c] = m ? atomic_exchange_explicit(&p->nremote[c], 0, memory_order_relaxed) : 0;
        }
        if (m) {
            p->free[c] = next_of(m);
            /* The next buffer was likely freed on another core: start
             * fetching it now, senders allocate back to back. */
            if (p->free[c])
                __builtin_prefetch(p->free[c], 1);
            if (p->nfree[c])
                p->nfree[c]--;
        }
    }
    if (!m) {
        size_t cap = c >= 0 ? class_cap[c] : len;
        m = malloc(sizeof *m + cap);
        if (!m)
            return NULL;
        m->cap = (uint32_t)cap;
        m->cls = c >= 0 && p ? (uint8_t)c : 0xff;
        m->owner = c >= 0 ? p : NULL;
    }
    m->qn.next = NULL;
    m->kind = 0;
    m->call = NULL;
    m->type_id = 0;
    m->peer = -1;
    m->pcrc = 0;
    memset(&m->hdr, 0, sizeof m->hdr);
    m->hdr.len = (uint32_t)len;
    return m;
}

static void push_chain(phx_pool_t *o, int c, uint32_t n, phx_msg_t *head, phx_msg_t *tail)
{
    atomic_fetch_add_explicit(&o->nremote[c], n, memory_order_relaxed);
    phx_msg_t *old = atomic_load_explicit(&o->remote[c], memory_order_relaxed);
    do {
        set_next(tail, old);
    } while (!atomic_compare_exchange_weak_explicit(&o->remote[c], &old, head,
                 memory_order_release, memory_order_relaxed));
}

void phx_pool_flush(void)
{
    for (int i = 0; i < NDEFER; i++) {
        defer_t *d = &deferred[i];
        if (d->head)
            push_chain(d->owner, d->cls, d->n, d->head, d->tail);
        d->owner = NULL;
        d->n = 0;
        d->head = d->tail = NULL;
    }
}

void phx_msg_free(phx_msg_t *m)
{
    if (!m)
        return;
    phx_pool_t *o = m->owner;
    if (!o || m->cls == 0xff) {
        free(m);
        return;
    }
    int c = m->cls;
    if (o == cur_pool) {
        if (o->nfree[c] >= class_keep[c]) {
            free(m);
            return;
        }
        set_next(m, o->free[c]);
        o->free[c] = m;
        o->nfree[c]++;
        return;
    }
    defer_t *d = &deferred[((uintptr_t)o >> 6 ^ (uintptr_t)c) % NDEFER];
    if (d->owner != o || d->cls != c) {
        if (d->head)
            push_chain(d->owner, d->cls, d->n, d->head, d->tail);
        d->owner = o;
        d->cls = c;
        d->n = 0;
        d->head = d->tail = NULL;
    }
    set_next(m, d->head);
    d->head = m;
    d->n++;
    if (!d->tail)
        d->tail = m;
}

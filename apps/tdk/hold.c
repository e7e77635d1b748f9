/* tdk --hold FILE: a gate that keeps the work open until a test says go.
 *
 * A test that kills a node must kill it while the node holds work, whatever
 * the load: a kill time taken from a calibration run is luck. With --hold,
 * every project leaf hands its result to its node's gate task while FILE is
 * missing, so no cell with a leaf below it can complete: the first interior
 * cell created on a node is pending until the gate opens, and the node logs
 * the event "tdk_hold" (JSON event log) at that moment. The test waits for
 * that line from its victim, kills the victim, then creates FILE.
 *
 * One gate task per node (spawned by rank 0's main task) polls FILE, once a
 * millisecond, by sending itself a message: the job is not quiescent while
 * the gate is closed, so no detector can end it early. The held results
 * are the gate task's state (pack/unpack), so a checkpoint (recovery=cr)
 * holds them with the cells they belong to and a rollback restores both
 * together. When FILE appears the gate sends what it holds; it stays alive
 * and forwards the results of leaves that decided to hold just before. A
 * leaf that runs before its node's gate is known here (it has not started
 * yet, or this is a respawned process whose gate was restored, not
 * started, and has not polled yet) waits in its own task (tdk_result
 * returns 1). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/tdk/tdk.h"
#include "core/eventlog.h"
#include "base/phx_err.h"

enum { T_POLL = 1, T_HELD = 2 };

typedef struct held {
    struct held *next;
    phx_tid_t dst;
    int tag;
    size_t len;
    unsigned char buf[];
} held_t;

/* T_HELD payload: dst, tag, then the result. */
typedef struct held_msg { phx_tid_t dst; int32_t tag; uint32_t len; } held_msg_t;

typedef struct gate_st { held_t *head, **tail; } gate_st_t;

/* The node's gate once it ran here (any worker reads). */
static _Atomic phx_tid_t gate_tid;
static _Atomic int gate_open;  /* FILE seen: monotonic */
static _Atomic int logged;     /* tdk_hold logged on this node */
static int gate_type;

static held_t *held_new(phx_tid_t dst, int tag, const void *buf, size_t len)
{
    held_t *h = malloc(sizeof *h + len);
    if (!h)
        return NULL;
    h->next = NULL;
    h->dst = dst;
    h->tag = tag;
    h->len = len;
    memcpy(h->buf, buf, len);
    return h;
}

static void push(gate_st_t *g, held_t *h)
{
    if (!g->tail)
        g->tail = &g->head;
    *g->tail = h;
    g->tail = &h->next;
}

int tdk_result(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    /* FILE checked here too: a restored gate that had opened polls no more. */
    if (!tdk_opt.hold || atomic_load(&gate_open) || access(tdk_opt.hold, F_OK) == 0) {
        atomic_store(&gate_open, 1);
        return tdk_send(c, dst, tag, buf, len);
    }
    phx_tid_t g = atomic_load(&gate_tid);
    if (g != PHX_TID_NONE) {
        unsigned char m[sizeof(held_msg_t) + 256];
        if (len > 256)
            return tdk_send(c, dst, tag, buf, len);   /* never: results are small */
        held_msg_t hm = { dst, tag, (uint32_t)len };
        memcpy(m, &hm, sizeof hm);
        memcpy(m + sizeof hm, buf, len);
        return tdk_send(c, g, T_HELD, m, sizeof hm + len);
    }
    return 1;
}

void tdk_hold_pending(uint64_t cell)
{
    if (!tdk_opt.hold || atomic_exchange(&logged, 1))
        return;
    if (!atomic_load(&gate_open))   /* pending for sure: the leaves below it will be held */
        phx_evlog("tdk_hold", "\"cell\":%" PRIu64, cell);
}

static void release(phx_ctx_t *c, gate_st_t *g)
{
    held_t *h = g->head;
    g->head = NULL;
    g->tail = &g->head;
    while (h) {
        held_t *next = h->next;
        tdk_send(c, h->dst, h->tag, h->buf, h->len);
        free(h);
        h = next;
    }
}

static void gate_poll(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src; (void)m; (void)n;
    phx_tid_t none = PHX_TID_NONE;
    atomic_compare_exchange_strong(&gate_tid, &none, phx_self(c));   /* a restored gate */
    if (!atomic_load(&gate_open) && access(tdk_opt.hold, F_OK) != 0) {
        /* A millisecond keeps 8 pollers off 2 cores; the worker runs any
         * queued cells between two polls. */
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        tdk_send(c, phx_self(c), T_POLL, NULL, 0);
        return;
    }
    atomic_store(&gate_open, 1);
    release(c, st);
    tdk_task_end(NULL, NULL);
}

static void gate_held(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    held_msg_t hm;
    (void)src;
    if (n < sizeof hm)
        return;
    memcpy(&hm, m, sizeof hm);
    const unsigned char *b = (const unsigned char *)m + sizeof hm;
    if (hm.len != n - sizeof hm)
        return;
    if (atomic_load(&gate_open)) {   /* held just before the gate opened */
        tdk_send(c, hm.dst, hm.tag, b, hm.len);
        tdk_task_end(NULL, NULL);
        return;
    }
    held_t *h = held_new(hm.dst, hm.tag, b, hm.len);
    if (!h) {
        fprintf(stderr, "tdk: rank %d: out of memory holding a result\n", phx_rank(c));
        phx_exit(c, 1);
        return;
    }
    push(st, h);
}

static void gate_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    gate_st_t *g = st;
    (void)arg; (void)len;
    g->tail = &g->head;
    atomic_store(&gate_tid, phx_self(c));
    tdk_send(c, phx_self(c), T_POLL, NULL, 0);
}

static void gate_fini(void *st)
{
    gate_st_t *g = st;
    while (g->head) {
        held_t *h = g->head;
        g->head = h->next;
        free(h);
    }
}

/* u32 count, then per result: u64 dst, i32 tag, u32 len, bytes. */
static int gate_pack(const void *st, void *buf, size_t cap)
{
    const gate_st_t *g = st;
    unsigned char *p = buf, *end = p + cap;
    uint32_t k = 0;
    if (cap < 4)
        return PHX_ENOSPC;
    p += 4;
    for (const held_t *h = g->head; h; h = h->next, k++) {
        if ((size_t)(end - p) < 16 + h->len)
            return PHX_ENOSPC;
        uint64_t d = h->dst;
        int32_t t = h->tag;
        uint32_t l = (uint32_t)h->len;
        memcpy(p, &d, 8);
        memcpy(p + 8, &t, 4);
        memcpy(p + 12, &l, 4);
        memcpy(p + 16, h->buf, h->len);
        p += 16 + h->len;
    }
    memcpy(buf, &k, 4);
    return (int)(p - (unsigned char *)buf);
}

static int gate_unpack(void *st, const void *buf, size_t len)
{
    gate_st_t *g = st;
    const unsigned char *p = buf, *end = p + len;
    uint32_t k;
    g->head = NULL;
    g->tail = &g->head;
    if (len < 4)
        return PHX_EPROTO;
    memcpy(&k, p, 4);
    p += 4;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t d;
        int32_t t;
        uint32_t l;
        if ((size_t)(end - p) < 16)
            return PHX_EPROTO;
        memcpy(&d, p, 8);
        memcpy(&t, p + 8, 4);
        memcpy(&l, p + 12, 4);
        if ((size_t)(end - p - 16) < l)
            return PHX_EPROTO;
        held_t *h = held_new(d, t, p + 16, l);
        if (!h)
            return PHX_ENOMEM;
        push(g, h);
        p += 16 + l;
    }
    return 0;
}

int tdk_gate_register(void)
{
    phx_type_t t = { .name = "tdk-gate", .state_size = sizeof(gate_st_t), .init = gate_init,
                     .fini = gate_fini, .pack = gate_pack, .unpack = gate_unpack,
                     .handlers = { [T_POLL] = gate_poll, [T_HELD] = gate_held } };
    return gate_type = phx_register_type(&t);
}

void tdk_gate_start(phx_ctx_t *c)
{
    if (!tdk_opt.hold)
        return;
    for (int r = 0; r < phx_size(c); r++)
        tdk_spawn_on(c, gate_type, r, NULL, 0, NULL);
}

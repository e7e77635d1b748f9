/* tdk --hold FILE: a gate that keeps the work open until a test says go.
 *
 * A test that kills a node must kill it while the node holds work, whatever
 * the load: a kill time taken from a calibration run is luck. With --hold,
 * every project leaf keeps its result on its own node while FILE is
 * missing, so no cell with a leaf below it can complete: the first interior
 * cell created on a node is pending until the gate opens, and the node logs
 * the event "tdk_hold" (JSON event log) at that moment. The test waits for
 * that line from its victim, kills the victim, then creates FILE.
 *
 * One gate task per node (spawned by rank 0's main task) polls FILE, once a
 * millisecond, by sending itself a message: the job is not quiescent while
 * the gate is closed, so no detector can end it early. When FILE appears it
 * sends the held results and ends; later leaves send at once. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/tdk/tdk.h"
#include "core/eventlog.h"
#include "phx_err.h"

enum { T_POLL = 1 };

typedef struct held {
    struct held *next;
    phx_tid_t dst;
    int tag;
    size_t len;
    unsigned char buf[];
} held_t;

/* The node's gate: leaves (any worker) append, the gate task drains. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static held_t *held_head, **held_tail = &held_head;
static int gate_open;          /* under lock */
static _Atomic int logged;     /* tdk_hold logged on this node */
static int gate_type;

int tdk_result(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    if (tdk_opt.hold) {
        pthread_mutex_lock(&lock);
        if (!gate_open) {
            held_t *h = malloc(sizeof *h + len);
            if (!h) {
                pthread_mutex_unlock(&lock);
                fprintf(stderr, "tdk: rank %d: out of memory holding a result\n", phx_rank(c));
                phx_exit(c, 1);
                return PHX_ENOMEM;
            }
            h->next = NULL;
            h->dst = dst;
            h->tag = tag;
            h->len = len;
            memcpy(h->buf, buf, len);
            *held_tail = h;
            held_tail = &h->next;
            pthread_mutex_unlock(&lock);
            return 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return tdk_send(c, dst, tag, buf, len);
}

void tdk_hold_pending(uint64_t cell)
{
    if (!tdk_opt.hold || atomic_exchange(&logged, 1))
        return;
    pthread_mutex_lock(&lock);
    int open = gate_open;
    pthread_mutex_unlock(&lock);
    if (!open)   /* pending for sure: the leaves below it will be held */
        phx_evlog("tdk_hold", "\"cell\":%" PRIu64, cell);
}

static void gate_poll(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)st; (void)src; (void)m; (void)n;
    if (access(tdk_opt.hold, F_OK) != 0) {
        /* A millisecond keeps 8 pollers off 2 cores; the worker runs any
         * queued cells between two polls. */
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        tdk_send(c, phx_self(c), T_POLL, NULL, 0);
        return;
    }
    pthread_mutex_lock(&lock);
    gate_open = 1;
    held_t *h = held_head;
    held_head = NULL;
    held_tail = &held_head;
    pthread_mutex_unlock(&lock);
    while (h) {
        held_t *next = h->next;
        tdk_send(c, h->dst, h->tag, h->buf, h->len);
        free(h);
        h = next;
    }
    tdk_task_end(NULL, NULL);
    phx_task_done(c);
}

static void gate_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    tdk_send(c, phx_self(c), T_POLL, NULL, 0);
}

int tdk_gate_register(void)
{
    phx_type_t t = { .name = "tdk-gate", .init = gate_init, .handlers = { [T_POLL] = gate_poll } };
    return gate_type = phx_register_type(&t);
}

void tdk_gate_start(phx_ctx_t *c)
{
    if (!tdk_opt.hold)
        return;
    for (int r = 0; r < phx_size(c); r++)
        tdk_spawn_on(c, gate_type, r, NULL, 0, NULL);
}

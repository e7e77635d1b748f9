/* Internal message buffers and per-thread pools.
 *
 * Every message in the runtime (application payloads, spawns, control
 * events between threads) is a phx_msg_t: an intrusive wfcqueue node, a
 * decoded frame header and an inline payload. Buffers come from the calling
 * thread's pool, so the hot path never calls malloc: a pool keeps a bounded
 * free list per size class, and a message freed on another thread goes back
 * to its owner through a lock-free stack the owner drains wholesale (an
 * exchange, so the usual ABA problem of Treiber stacks cannot arise).
 *
 * Memory bound: a pool caches at most PHX_POOL_CACHE_BYTES per class; the
 * rest goes back to jemalloc. Messages in flight are bounded by the
 * transport's per-peer send budget and the inbound read watermark. */
#ifndef PHX_MSG_H
#define PHX_MSG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <urcu/wfcqueue.h>

#include "net/frame.h"

enum phx_msg_kind {
    PHX_MK_APP = 1,     /* application message to a task */
    PHX_MK_SPAWN,       /* create a task (payload = spawn arg) */
    PHX_MK_EXIT,        /* worker -> comm: phx_exit(code) */
    PHX_MK_STOP,        /* comm -> worker: leave the loop */
    PHX_MK_CALL,        /* worker -> comm: run m->call on the comm thread */
    PHX_MK_KICK,        /* -> worker: offer task hdr.dst's held messages again */
};

struct phx_node;

typedef struct phx_pool phx_pool_t;

/* liburcu's queues order memory with their own barriers (documented in
 * urcu/wfcqueue.h: enqueue is a full barrier, dequeue reads with
 * CMM_LOAD_SHARED), which ThreadSanitizer cannot see. Under TSan every
 * hand-off is annotated on the message itself: release before enqueue,
 * acquire after dequeue, so TSan still checks every access to the payload;
 * core/pool.c's built-in TSan suppressions silence only the queue internals. */
#ifdef PHX_TSAN
#include <sanitizer/tsan_interface.h>
#define PHX_HANDOFF_RELEASE(m) __tsan_release(m)
#define PHX_HANDOFF_ACQUIRE(m) __tsan_acquire(m)
#else
#define PHX_HANDOFF_RELEASE(m) ((void)(m))
#define PHX_HANDOFF_ACQUIRE(m) ((void)(m))
#endif

typedef struct phx_msg {
    struct cds_wfcq_node qn;    /* must stay first: queues link through it */
    phx_pool_t *owner;          /* NULL: plain heap allocation */
    uint32_t cap;               /* payload capacity */
    uint8_t kind;               /* enum phx_msg_kind */
    uint8_t cls;                /* size class, or 0xff */
    uint16_t type_id;           /* task type for SPAWN */
    int32_t peer;               /* destination node (out) / source node (in) */
    /* phx_crc32c(0, data, hdr.len), summed while phx_send copied the
     * payload in, so the transport need not read it again; 0: not summed
     * (a payload whose checksum is 0 is merely summed again). Whoever
     * changes data after setting it must reset it. Fills padding. */
    uint32_t pcrc;
    phx_frame_hdr_t hdr;        /* src, dst, ssn, inc, tag, len */
    /* PHX_MK_CALL: runs on the comm thread and owns m from then on. */
    void (*call)(struct phx_node *n, struct phx_msg *m);
    uint8_t data[];             /* hdr.len bytes of payload */
} phx_msg_t;

/* What a message queued for another node counts against send-buffer until
 * the peer acknowledges it: its frame and the buffer that holds it. Wire
 * bytes alone let a stream of small messages keep several times
 * send-buffer in memory (an 8-byte message's buffer is larger than its
 * frame), all of it touched fresh, which cost a quarter of the CPU of an
 * 8-byte message flood. */
static inline int64_t phx_msg_charge(size_t len)
{
    return (int64_t)(len + PHX_FRAME_HDR + sizeof(phx_msg_t));
}

/* Creates the calling thread's pool and makes it current. One per thread;
 * destroy only after every message it handed out came back or the process
 * is ending (phx_pool_destroy frees cached and remotely-returned buffers). */
phx_pool_t *phx_pool_create(void);
void phx_pool_destroy(phx_pool_t *p);

/* Any thread. Returns a message with cap >= len and hdr.len = len, or NULL. */
phx_msg_t *phx_msg_alloc(size_t len);
/* Any thread; returns the buffer to its owning pool. NULL is ignored.
 * Buffers of other threads' pools are batched: they reach their owner at
 * the calling thread's next phx_pool_flush. */
void phx_msg_free(phx_msg_t *m);
/* Pushes this thread's batched remote frees to their owners. Call at the
 * end of every batch of work and before the thread exits. */
void phx_pool_flush(void);

#endif

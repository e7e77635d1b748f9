/* Termination detection glue (comm thread): see core/term.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"
#include "core/eventlog.h"
#include "core/send.h"
#include "core/term.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

typedef struct td_self {
    struct td_self *next;
    size_t len;
    uint8_t data[];
} td_self_t;

static void td_send(void *ctx, int dst, const void *msg, size_t len)
{
    phx_node_t *n = ctx;
    phx_frame_hdr_t h = phx_frame_hdr(PHX_FT_TD, 0, (uint64_t)n->rank, (uint64_t)dst, (uint32_t)len);
    PHX_CNT_ADD(n->td_ctrl_sent, 1);
    if (dst == n->rank) {
        /* Deferred: re-entering the state machine from its own callback
         * would break its invariants. phx_term_flush delivers these. */
        td_self_t *x = malloc(sizeof *x + len);
        if (!x) {
            PHX_ERROR("td", "out of memory for a self-addressed control message");
            phx_node_exit(n, 1, 1);
            return;
        }
        x->next = NULL;
        x->len = len;
        memcpy(x->data, msg, len);
        *n->td_self_tail = x;
        n->td_self_tail = &x->next;
        return;
    }
    int rc = phx_net_send(n->net, dst, &h, NULL, 0, msg, len, 0);
    if (rc == PHX_EDEAD) {   /* its death reaches the detector through on_failure */
        PHX_DEBUG("td", "control message to rank %d not sent: %s", dst, phx_strerror(rc));
    } else if (rc) {         /* lost between live nodes: the detector's counts are wrong */
        PHX_ERROR("td", "cannot send a control message to rank %d: %s", dst, phx_strerror(rc));
        phx_node_exit(n, 1, 1);
    }
}

/* Without a detector the queue is always empty. */
void phx_term_flush(phx_node_t *n)
{
    while (n->td_self && !atomic_load(&n->stopping)) {
        td_self_t *x = n->td_self;
        n->td_self = x->next;
        if (!n->td_self)
            n->td_self_tail = &n->td_self;
        int rc = n->td->on_ctrl(n->td_st, n->rank, x->data, x->len);
        free(x);
        if (rc < 0) {   /* its own message: a detector bug, state now unknown */
            PHX_ERROR("td", "%s rejected its own control message: %s", n->td->name,
                      phx_strerror(rc));
            phx_node_exit(n, 1, 1);
        }
    }
}

static void td_declare(void *ctx)
{
    phx_node_t *n = ctx;
    PHX_INFO("td", "%s: global termination detected", n->td->name);
    phx_evlog("td_declare", "\"td\":\"%s\"", n->td->name);
    phx_node_exit(n, n->exit_code, 0);
}

static void td_fatal(void *ctx, int code, const char *why)
{
    phx_node_t *n = ctx;
    PHX_ERROR("td", "%s cannot decide termination: %s (%s)", n->td->name, why, phx_strerror(code));
    phx_evlog("td_fatal", "\"td\":\"%s\"", n->td->name);
    phx_node_exit(n, 1, 1);
}

static void td_release(void *ctx, uint64_t token, const uint8_t *pb)
{
    phx_node_t *n = ctx;
    uint64_t *v = phx_map_get(&n->td_held, token);
    if (!v) {   /* a detector bug: a message it never held, or twice */
        PHX_ERROR("td", "%s released an unknown message (token %llx)", n->td->name,
                  (unsigned long long)token);
        phx_node_exit(n, 1, 1);
        return;
    }
    phx_msg_t *m = (phx_msg_t *)(uintptr_t)*v;
    phx_map_del(&n->td_held, token);
    phx_send_msg(n, m, pb, phx_term_pb_size(n));
}

int phx_term_create(phx_node_t *n)
{
    phx_map_init(&n->td_held);
    n->td_self_tail = &n->td_self;
    /* none, or cut: recovery=cr decides on its own checkpoints (ft/ckpt/quiet.h). */
    if (n->cfg.td_mode != PHX_TD_DETECTOR)
        return 0;
    n->td = phx_td_find(n->cfg.td);
    if (!n->td) {
        fprintf(stderr, "phalanx: bad value '%s' for option td: expected none, 4c, edod, hcda, cda, "
                        "indep, rellazy, releager or cut (recovery=cr)\n", n->cfg.td);
        return PHX_EINVAL;
    }
    phx_td_env_t env = { .rank = n->rank, .size = n->size, .ctx = n, .send = td_send,
                         .declare = td_declare, .fatal = td_fatal, .release = td_release };
    int rc = n->td->create(&env, &n->td_st);
    if (rc)
        fprintf(stderr, "phalanx: cannot create detector %s: %s\n", n->cfg.td, phx_strerror(rc));
    return rc;
}

void phx_term_start(phx_node_t *n)
{
    if (!n->td)
        return;
    n->td->start(n->td_st, n->rank == 0);
    n->td_busy = n->rank == 0;
}

size_t phx_term_pb_size(const phx_node_t *n) { return n->td ? n->td->pb_size : 0; }

int phx_term_on_send(phx_node_t *n, phx_msg_t *m, uint8_t *pb)
{
    if (!n->td)
        return 0;
    int rc;
    uint64_t token = (uint64_t)(uintptr_t)m;
    uint64_t *slot = phx_map_put(&n->td_held, token);
    if (slot) {
        *slot = token;
        rc = n->td->on_send(n->td_st, m->peer, token, pb);
    } else {
        rc = PHX_ENOMEM;
    }
    if (rc == PHX_TD_DELAY) {
        /* The detector owns it now (a send fence, a credit batch) and
         * releases it through td_release; it no longer counts as local
         * work. */
        n->td_held_new = 1;
        atomic_fetch_sub(&n->work, 1);
        return 1;
    }
    if (slot)
        phx_map_del(&n->td_held, token);
    if (rc < 0) {
        /* Sending it anyway would carry no piggyback (CDA: no credit) or
         * escape the detector's count: termination could be declared
         * early. */
        PHX_ERROR("td", "%s cannot account a message to rank %d: %s; ending the job",
                  n->td->name, m->peer, phx_strerror(rc));
        phx_node_exit(n, 1, 1);
        return rc;
    }
    return 0;
}

void phx_term_on_recv(phx_node_t *n, int peer, const uint8_t *pb)
{
    if (!n->td)
        return;
    n->td_busy = 1;
    n->td->on_recv(n->td_st, peer, pb);
}

int phx_term_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    if (!n->td)
        return 0;
    if (n->td->on_ctrl(n->td_st, peer, payload, h->len) < 0)
        phx_net_reject(n->net, peer, "malformed termination-detection message");
    phx_term_poll(n);   /* also flushes self-sends */
    return 1;
}

void phx_term_on_failure(phx_node_t *n, int rank)
{
    if (!n->td || !n->td->on_failure)
        return;
    n->td->on_failure(n->td_st, rank);
    phx_term_flush(n);
}

/* Reports every remote message the workers finished since the last call;
 * returns whether there was any. */
static int td_harvest(phx_node_t *n)
{
    int ended = 0;
    for (int s = 0; s < n->size; s++) {
        uint64_t k = atomic_exchange_explicit(&n->processed[s], 0, memory_order_acquire);
        ended |= k != 0;
        while (k--)
            n->td->on_processed(n->td_st, s);
    }
    return ended;
}

void phx_term_poll(phx_node_t *n)
{
    if (!n->td || atomic_load(&n->stopping))
        return;
    phx_term_flush(n);
    int ended = td_harvest(n);
    /* Messages gathered in this read but not yet handed over are work too. */
    if (n->td_busy && n->batch_pending == 0 && atomic_load(&n->work) == 0) {
        /* Zero work is stable here (only this thread raises it), but a
         * worker may have counted a message between the harvest and the
         * load: harvest once more so on_processed precedes on_idle. */
        td_harvest(n);
        n->td_busy = 0;
        n->td_held_new = 0;
        n->td->on_idle(n->td_st);
    } else if ((ended || n->td_held_new) && n->td->on_task_done) {
        /* Work ended but the node is still busy: a detector that batches a
         * task's sends (CDA) releases them here. */
        n->td_held_new = 0;
        n->td->on_task_done(n->td_st);
    }
    phx_term_flush(n);
}

const char *phx_term_stats(phx_node_t *n, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    if (!n->td)
        return "none";
    phx_td_stat_t st[PHX_TD_MAX_STATS];
    int k = n->td->stats(n->td_st, st, PHX_TD_MAX_STATS);
    for (int i = 0; i < k && off < cap - 64; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s\"%s\":%llu", i ? "," : "",
                                st[i].name, (unsigned long long)st[i].count);
    return n->td->name;
}

void phx_term_free(phx_node_t *n)
{
    for (size_t i = 0; i < n->td_held.cap; i++)
        if (n->td_held.keys[i])
            phx_msg_free((phx_msg_t *)(uintptr_t)n->td_held.vals[i]);
    phx_map_free(&n->td_held);
    while (n->td_self) {
        td_self_t *x = n->td_self;
        n->td_self = x->next;
        free(x);
    }
    if (n->td)
        n->td->destroy(n->td_st);
    n->td = NULL;
}

/* Failure detection glue: drives the pure ring-heartbeat detector (ft/hb,
 * ft/hb/hb.h) from the node's libuv loop and transport.
 *
 * Everything here runs on the communication thread (the loop's thread):
 * the timer, the frame and peer-down hooks and every call into the
 * detector. Workers never touch n->ft.
 *
 * Re-entrancy. The detector's callbacks may not call back into it, but the
 * node's reaction to a death does: phx_node_notify_dead closes the dead
 * rank's connection, and the transport reports that synchronously through
 * on_peer_down -> phx_ft_on_peer_down -> phx_ft_hb_suspect. So the callbacks
 * only record (deaths, fencing) and log; the node is told after the
 * detector call returned, in flush(), which tolerates being re-entered.
 *
 * When a notice is delivered, and when this node fences itself (isolation,
 * partition, lost link), is decided by the pure state machine of
 * ft/fence; this file feeds it and applies its outputs. */
#include "core/ft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/node.h"
#include "ft/fence/fence.h"
#include "ft/hb/hb.h"
#include "ft/hb/ring.h"
#include "base/phx_err.h"
#include "base/phx_log.h"
#include "base/phx_wire.h"

struct phx_ft {
    phx_node_t *n;
    phx_ft_hb_t *hb;
    phx_ft_fence_t *fence;      /* notices held, self-fencing (ft/fence) */
    int *ring;                  /* position -> rank, as given to the detector */
    uv_timer_t timer;
    int timer_open;             /* initialised and not yet closed */
    int started, stopped;
    int fenced_done;
    int flushing;
    uint64_t declared_seen;     /* detector's `declared` counter already logged */
    int emitter, observer;      /* last logged ring neighbours */
};

static uint64_t now_ns(void) { return phx_now_ns(); }   /* CLOCK_MONOTONIC */

/* ---- detector callbacks (inside a detector call: record and log only) ---- */

static void hb_send(void *ctx, int dst, unsigned type, const void *buf, size_t len)
{
    phx_ft_t *ft = ctx;
    phx_node_t *n = ft->n;
    phx_frame_hdr_t h = phx_frame_hdr(phx_ft_hb_frame_type(type), type, (uint64_t)n->rank, (uint64_t)dst,
                                      (uint32_t)len);
    /* Urgent lane: a heartbeat queued behind megabytes of application data
     * would arrive late and look like a failure. */
    int rc = phx_net_send(n->net, dst, &h, NULL, 0, buf, len, PHX_NET_URGENT);
    if (rc && rc != PHX_EDEAD)   /* EDEAD: closed peer, the detector copes */
        PHX_WARN("ft", "%s to rank %d not sent: %s", phx_ft_hb_msg_name(type), dst, phx_strerror(rc));
}

static void hb_on_dead(void *ctx, int rank, uint64_t when)
{
    phx_ft_t *ft = ctx;
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(ft->hb, &st);
    /* T3 bumps `declared` right before adding the emitter to D, so a rise
     * since the last notice means this node originated this detection. */
    int local = st.declared > ft->declared_seen;
    if (local) {
        ft->declared_seen = st.declared;
        phx_evlog("suspect", "\"dead\":%d", rank);
    }
    phx_evlog("notice", "\"dead\":%d,\"via\":\"%s\"", rank, local ? "local" : "bcast");
    PHX_INFO("ft", "rank %d is dead (%s)", rank, local ? "detected here" : "broadcast");
    int rc = phx_ft_fence_on_dead(ft->fence, rank, phx_ft_hb_incarnation(ft->hb, rank), when, now_ns());
    if (rc)
        PHX_ERROR("ft", "rank %d's failure notice not queued, it will not be delivered: %s", rank,
                  phx_strerror(rc));
}

static void hb_on_fenced(void *ctx)
{
    phx_ft_t *ft = ctx;
    phx_ft_fence_declared(ft->fence);
}

/* ---- after every detector call ----------------------------------------- */

static void on_timer(uv_timer_t *t);

static void rearm(phx_ft_t *ft)
{
    if (ft->stopped || !ft->timer_open)
        return;
    uint64_t d = phx_ft_hb_next_deadline(ft->hb), held = phx_ft_fence_deadline(ft->fence);
    if (held < d)
        d = held;
    if (d == UINT64_MAX) {
        uv_timer_stop(&ft->timer);
        return;
    }
    /* libuv counts in whole ms from its cached loop time: refresh it and
     * round up, so the timer never fires before the deadline by more than
     * the loop clock's granularity (an early tick is a no-op and re-arms). */
    uv_update_time(&ft->n->loop);
    uint64_t now = now_ns();
    /* At least 1 ms, also for a deadline already past: a timer due in the
     * current iteration could run before the sockets are polled, and the
     * detector's T3 relies on reading them between two ticks. */
    uint64_t ms = d > now ? (d - now + 999999) / 1000000 : 1;
    uv_timer_start(&ft->timer, on_timer, ms, 0);
}

/* Returns the new emitter if the ring changed it, else -1. */
static int log_ring(phx_ft_t *ft)
{
    int e = phx_ft_hb_emitter(ft->hb), o = phx_ft_hb_observer(ft->hb), old = ft->emitter;
    if (e == ft->emitter && o == ft->observer)
        return -1;
    ft->emitter = e;
    ft->observer = o;
    phx_evlog("ring", "\"emitter\":%d,\"observer\":%d", e, o);
    PHX_INFO("ft", "ring repaired: emitter %d, observer %d", e, o);
    return e != old && e != ft->n->rank ? e : -1;
}

/* The transport's loss report for peer (on_peer_down) as a detector hint.
 * A refused redial or probe means the peer's process is gone, unless this
 * node itself has just been stalled: then the others may have declared us
 * and left, and isolation fencing (ft/fence) must decide, not a fast
 * suspicion of peers that are merely done with us. Returns the detector's
 * answer (1: the emitter's timer moved or it was declared). */
static int hint(phx_ft_t *ft, int peer, uint64_t now)
{
    int gone = !phx_ft_hb_in_doubt(ft->hb, now) && phx_net_peer_gone(ft->n->net, peer);
    int rc = gone ? phx_ft_hb_suspect_gone(ft->hb, peer, now) : phx_ft_hb_suspect(ft->hb, peer, now);
    if (rc < 0 && rc != PHX_EFENCED)
        PHX_ERROR("ft", "suspect(rank %d): %s", peer, phx_strerror(rc));
    else if (rc == 1)
        PHX_INFO("ft", "connection to emitter %d lost: %s", peer,
                 gone ? "its process is gone, declaring it" : "waiting for its heartbeat grace");
    return rc;
}

/* Applies what the last detector call produced. Re-entered from
 * phx_node_notify_dead (see the top comment): the inner call returns at
 * once and the outer loop picks up anything queued meanwhile. */
static void flush(phx_ft_t *ft)
{
    phx_node_t *n = ft->n;
    if (ft->flushing)
        return;
    ft->flushing = 1;
    uint64_t now = now_ns();
    int why = ft->fenced_done ? 0
                              : phx_ft_fence_verdict(ft->fence, now, phx_ft_hb_in_doubt(ft->hb, now));
    if (why) {
        phx_ft_fence_info_t in;
        phx_ft_fence_get_info(ft->fence, &in);
        if (why == PHX_FT_FENCE_ISOLATED) {
            PHX_WARN("ft", "stalled past delta, then lost the connection to all %d live peers: we "
                           "were declared dead", in.alive);
        } else if (why == PHX_FT_FENCE_MINORITY) {
            PHX_ERROR("ft", "%d members fell silent at once and none of their hosts answered, %d "
                            "remain here: this node is on the minority side of a partition",
                      in.silent, in.live);
            phx_evlog("partition", "\"silent\":%d,\"live\":%d", in.silent, in.live);
        }
        /* We are in the others' D (or about to be): every message we send
         * is refused with YOU_ARE_DEAD, and acting on our own view would
         * split the group. Leave; the launcher reports exit 75 as fenced. */
        ft->fenced_done = 1;
        PHX_ERROR("ft", "declared dead by the cluster (false suspicion?); terminating");
        phx_evlog("fenced", NULL);
        phx_node_exit(n, PHX_EXIT_FENCED, 0);
    }
    if (!ft->fenced_done) {
        /* A new emitter whose port already refused us (reported while it
         * was not our emitter, when the hint had to be ignored: two
         * ring-adjacent ranks killed together) gets that hint now rather
         * than the 2 delta a new emitter is granted. */
        for (int e = log_ring(ft); e >= 0 && phx_net_peer_gone(n->net, e) && hint(ft, e, now) == 1;)
            e = log_ring(ft);
        phx_ft_fence_notice_t d;
        for (;;) {
            /* The connection goes at once even when the notice waits:
             * nothing from the dead incarnation may arrive after its
             * declaration. notify_dead may re-enter the detector and queue
             * more: closed here before the next delivery, as the pass
             * (phx_ft_fence_next) picks them up. */
            while (phx_ft_fence_take_declared(ft->fence, &d))
                phx_net_close_inc(n->net, d.rank, d.inc, "declared dead");
            if (!phx_ft_fence_next(ft->fence, now, &d))
                break;
            /* "notice" was the detector's decision; "failure" is the runtime
             * acting on it (recovery, detectors, phx_on_failure callbacks). */
            phx_evlog("failure", "\"dead\":%d,\"held_ms\":%llu", d.rank,
                      (unsigned long long)((now_ns() - d.decl_ns) / 1000000));
            phx_node_notify_dead(n, d.rank, d.inc, d.when_ns);   /* no-op once stopping */
        }
    }
    ft->flushing = 0;
    rearm(ft);
}

static void on_timer(uv_timer_t *t)
{
    phx_ft_t *ft = t->data;
    if (ft->stopped)
        return;
    int rc = phx_ft_hb_tick(ft->hb, now_ns());
    if (rc && rc != PHX_EFENCED)
        PHX_ERROR("ft", "detector tick failed: %s", phx_strerror(rc));
    flush(ft);
}

/* ---- hooks --------------------------------------------------------------- */

static int fence_reached(void *ctx, int r)
{
    phx_ft_t *ft = ctx;
    return phx_net_peer_reached(ft->n->net, r);
}

static int fence_connected(void *ctx, int r)
{
    phx_ft_t *ft = ctx;
    return phx_net_peer_connected(ft->n->net, r);
}

static int make_hb(phx_ft_t *ft, uint16_t view, phx_ft_hb_t **out)
{
    phx_node_t *n = ft->n;
    phx_ft_hb_cfg_t cfg = {
        .nranks = n->size,
        .rank = n->rank,
        .incarnation = n->inc,
        .view = view,
        .ring = ft->ring,
        .delta_ns = (uint64_t)n->cfg.hb_timeout_ms * 1000000ull,
        .eta_ns = (uint64_t)n->cfg.hb_period_ms * 1000000ull,
        /* hint grace (delta/2) and stall slack (eta): detector defaults */
    };
    phx_ft_hb_env_t env = { .ctx = ft, .send = hb_send, .on_dead = hb_on_dead,
                            .on_fenced = hb_on_fenced };
    return phx_ft_hb_create(&cfg, &env, out);
}

int phx_ft_init(phx_node_t *n)
{
    if (!n->cfg.ft)
        return 0;
    phx_ft_t *ft = calloc(1, sizeof *ft);
    uint32_t *host = calloc((size_t)n->size, sizeof *host);
    if (!ft || !host) {
        free(ft);
        free(host);
        return PHX_ENOMEM;
    }
    n->ft = ft;
    ft->n = n;
    ft->ring = calloc((size_t)n->size, sizeof *ft->ring);
    if (!ft->ring) {
        free(host);
        return PHX_ENOMEM;   /* phx_ft_free releases the rest */
    }
    phx_ft_fence_cfg_t fcfg = { .nranks = n->size, .rank = n->rank,
                                .delta_ns = (uint64_t)n->cfg.hb_timeout_ms * 1000000ull };
    phx_ft_fence_env_t fenv = { .ctx = ft, .reached = fence_reached, .connected = fence_connected };
    int rc = phx_ft_fence_create(&fcfg, &fenv, &ft->fence);
    if (rc) {
        free(host);
        return rc;
    }
    /* Host id = lowest rank with the same host string: identical on every
     * node, since all nodes got the same PHX_PEERS. */
    for (int r = 0; r < n->size; r++) {
        host[r] = (uint32_t)r;
        for (int q = 0; q < r; q++) {
            if (strcmp(n->cfg.peers[q].host, n->cfg.peers[r].host) == 0) {
                host[r] = host[q];
                break;
            }
        }
    }
    rc = phx_ft_ring_build(n->size, host, ft->ring);
    free(host);
    if (rc)
        return rc;
    if ((rc = make_hb(ft, 0, &ft->hb)))
        return rc;
    ft->emitter = phx_ft_hb_emitter(ft->hb);
    ft->observer = phx_ft_hb_observer(ft->hb);
    if ((rc = uv_timer_init(&n->loop, &ft->timer))) {
        PHX_ERROR("ft", "cannot create the heartbeat timer: %s", uv_strerror(rc));
        return PHX_EIO;
    }
    ft->timer.data = ft;
    ft->timer_open = 1;
    PHX_INFO("ft", "failure detection on: delta %d ms, eta %d ms, emitter %d, observer %d",
             n->cfg.hb_timeout_ms, n->cfg.hb_period_ms, ft->emitter, ft->observer);
    return 0;
}

void phx_ft_start(phx_node_t *n)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped || ft->started)
        return;
    ft->started = 1;
    phx_ft_fence_start(ft->fence);
    if (phx_evlog_enabled()) {
        /* "[r0,r1,...]": at most 11 bytes per rank. The detector's ring has
         * ring[i+1] observing ring[i]; the event-log contract
         * (tools/chaos/README.md) has ring[i] observing ring[i+1], so the
         * order is logged reversed. */
        size_t cap = (size_t)n->size * 12 + 3, off = 0;
        char *s = malloc(cap);
        if (s) {
            s[off++] = '[';
            for (int i = 0; i < n->size; i++)
                off += (size_t)snprintf(s + off, cap - off, "%s%d", i ? "," : "",
                                        ft->ring[n->size - 1 - i]);
            s[off++] = ']';
            s[off] = 0;
            if (off > 700)   /* the event log truncates lines at 768 bytes */
                PHX_WARN("ft", "ring of %d ranks does not fit one event-log line: chaos tools "
                               "will see a malformed start event", n->size);
            phx_evlog("start", "\"size\":%d,\"ring\":%s", n->size, s);
            free(s);
        } else {
            PHX_ERROR("ft", "out of memory for the start event; the chaos tools need it");
        }
    }
    int rc = phx_ft_hb_start(ft->hb, now_ns());
    if (rc)
        PHX_ERROR("ft", "detector start failed: %s", phx_strerror(rc));
    flush(ft);
}

int phx_ft_new_view(phx_node_t *n, uint16_t view, const uint8_t *dead, const uint32_t *inc)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped)
        return 0;
    phx_ft_hb_t *hb;
    int k = 0, *l = malloc((size_t)n->size * sizeof *l);
    if (!l)
        return PHX_ENOMEM;
    for (int r = 0; r < n->size; r++)
        if (dead[r] && r != n->rank)
            l[k++] = r;
    int rc = make_hb(ft, view, &hb);
    if (!rc && (rc = phx_ft_hb_preset_dead(hb, l, k)))
        phx_ft_hb_destroy(hb);
    for (int r = 0; !rc && r < n->size; r++) {
        uint32_t i = ft->hb ? phx_ft_hb_incarnation(ft->hb, r) : 0;
        if (inc && inc[r] > i)
            i = inc[r];
        if (r != n->rank && i && !dead[r] && (rc = phx_ft_hb_preset_inc(hb, r, i)))
            phx_ft_hb_destroy(hb);
    }
    free(l);
    if (rc)
        return rc;
    phx_ft_hb_destroy(ft->hb);
    ft->hb = hb;
    ft->declared_seen = 0;
    phx_ft_fence_new_view(ft->fence, dead);
    ft->started = 1;   /* a rejoining node starts here, not at all-up */
    PHX_INFO("ft", "membership view %u: %d dead, emitter %d, observer %d", (unsigned)view, k,
             phx_ft_hb_emitter(hb), phx_ft_hb_observer(hb));
    phx_evlog("view", "\"view\":%u,\"dead\":%d", (unsigned)view, k);
    if ((rc = phx_ft_hb_start(hb, now_ns())))
        return rc;
    flush(ft);
    return 0;
}

/* Logs a received BCASTMSG (wire format in ft/hb/README.md) for the chaos
 * tools; the detector validates it independently. */
static void log_bcast(const uint8_t *p, uint32_t len)
{
    if (!phx_evlog_enabled())
        return;
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    (void)phx_wdec_take(&d, 16);   /* header */
    uint32_t origin = phx_wdec_u32(&d), seq = phx_wdec_u32(&d);
    (void)phx_wdec_take(&d, 8);    /* dead, cube, tree, pad */
    uint32_t nd = phx_wdec_u32(&d);
    /* Malformed ones are the detector's to reject; oversized sets would
     * not fit an event-log line (768 bytes, core/eventlog.c). */
    if (d.err || nd > 48 || phx_wdec_left(&d) != 4 * (size_t)nd)
        return;
    char s[48 * 12 + 3];
    size_t off = 0;
    s[off++] = '[';
    for (uint32_t i = 0; i < nd; i++)
        off += (size_t)snprintf(s + off, sizeof s - off, "%s%u", i ? "," : "", phx_wdec_u32(&d));
    s[off++] = ']';
    s[off] = 0;
    phx_evlog("bcast", "\"origin\":%u,\"seq\":%u,\"dset\":%s", origin, seq, s);
}

void phx_ft_on_frame(phx_node_t *n, int peer, const phx_frame_hdr_t *h, const uint8_t *payload)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped || ft->fenced_done)
        return;
    /* The frame type must match what the tag's message type travels in. */
    if (phx_ft_hb_frame_type(h->tag) != h->type) {
        phx_net_reject(n->net, peer, "heartbeat frame with a mismatched tag");
        return;
    }
    phx_ft_fence_on_heard(ft->fence, peer);   /* the link is up again (reconnected) */
    if (h->type == PHX_FT_BCAST)
        log_bcast(payload, h->len);
    int rc = phx_ft_hb_on_msg(ft->hb, peer, h->tag, payload, h->len, now_ns());
    if (rc == PHX_EPROTO) {
        phx_net_reject(n->net, peer, "malformed heartbeat-protocol message");
    } else if (rc == PHX_ENOMEM) {
        /* State unchanged; the message is lost like a dropped packet, which
         * the protocol absorbs within delta. */
        PHX_ERROR("ft", "out of memory handling %s from rank %d", phx_ft_hb_msg_name(h->tag), peer);
    } else if (rc && rc != PHX_EFENCED) {
        PHX_ERROR("ft", "%s from rank %d: %s", phx_ft_hb_msg_name(h->tag), peer, phx_strerror(rc));
    }
    flush(ft);
}

void phx_ft_on_peer_up(phx_node_t *n, int peer)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped || ft->fenced_done)
        return;
    if (phx_ft_fence_on_peer_up(ft->fence, peer))
        flush(ft);
}

void phx_ft_on_peer_down(phx_node_t *n, int peer)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped || ft->fenced_done)
        return;
    phx_ft_fence_on_conn_closed(ft->fence, peer);
    /* The transport delivered every byte read from the connection before
     * reporting its loss, so the hint comes after the last heartbeat. */
    hint(ft, peer, now_ns());
    flush(ft);
}

/* A link to a live peer could not be restored (net/transport.h,
 * on_link_failed): ft/fence decides who leaves (fence.h). */
int phx_ft_on_link_failed(phx_node_t *n, int peer)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped || ft->fenced_done)
        return 0;
    switch (phx_ft_fence_on_link_failed(ft->fence, peer, now_ns())) {
    case PHX_FT_FENCE_LINK_WAIT:
        return 1;
    case PHX_FT_FENCE_LINK_PEER:
        PHX_WARN("ft", "link to rank %d lost for good: rank %d leaves the job", peer, peer);
        return 0;
    case PHX_FT_FENCE_LINK_SELF:
        PHX_ERROR("ft", "link to live rank %d lost for good: leaving the job so that the ring decides",
                  peer);
        flush(ft);
        return 0;
    default:
        return 0;
    }
}

void phx_ft_stop(phx_node_t *n)
{
    phx_ft_t *ft = n->ft;
    if (!ft || ft->stopped)
        return;
    ft->stopped = 1;
    if (ft->timer_open) {
        uv_timer_stop(&ft->timer);
        uv_close((uv_handle_t *)&ft->timer, NULL);
        ft->timer_open = 0;
    }
}

void phx_ft_free(phx_node_t *n)
{
    phx_ft_t *ft = n->ft;
    if (!ft)
        return;
    if (ft->hb) {
        phx_ft_hb_stats_t st;
        phx_ft_hb_get_stats(ft->hb, &st);
        PHX_INFO("ft", "heartbeats sent %llu, received %llu; declared %llu; stalls %llu; hints %llu",
                 (unsigned long long)st.sent[PHX_FT_HB_HEARTBEAT],
                 (unsigned long long)st.recv[PHX_FT_HB_HEARTBEAT], (unsigned long long)st.declared,
                 (unsigned long long)st.stalls, (unsigned long long)st.hints);
        phx_ft_hb_destroy(ft->hb);
    }
    phx_ft_fence_destroy(ft->fence);
    free(ft->ring);
    free(ft);
    n->ft = NULL;
}

int phx_ft_get_stats(phx_node_t *n, struct phx_ft_hb_stats *out)
{
    if (!n->ft || !n->ft->hb)
        return PHX_ENOENT;
    phx_ft_hb_get_stats(n->ft->hb, out);
    return 0;
}

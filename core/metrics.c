/* Node metrics (see metrics.h for the threading contract). */
#define _GNU_SOURCE
#include "core/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/ft.h"
#include "core/node.h"
#include "net/transport.h"
#include "ft/hb/hb.h"
#include "base/phx_err.h"
#include "base/phx_log.h"

#define SUB "metrics"
#define PUBLISH_MS 250

typedef struct mdef {
    const char *name, *kind, *help, *label;   /* label: {direction="..."} etc., or NULL */
} mdef_t;

static mdef_t defs[PHX_METRICS_MAX] = {
    [PHX_M_MSGS_SENT] = { "phx_messages_total", "counter",
                          "application messages: sent by this node's tasks (node-local ones included), "
                          "received from other nodes", "direction=\"sent\"" },
    [PHX_M_MSGS_RECV] = { "phx_messages_total", "counter", NULL, "direction=\"received\"" },
    [PHX_M_BYTES_SENT] = { "phx_bytes_total", "counter", "application payload bytes (as messages)",
                           "direction=\"sent\"" },
    [PHX_M_BYTES_RECV] = { "phx_bytes_total", "counter", NULL, "direction=\"received\"" },
    [PHX_M_Q_WORK] = { "phx_queue_depth", "gauge",
                       "local work in progress (messages queued or running), inbound bytes not yet "
                       "handled, outbound bytes not yet written", "queue=\"work\"" },
    [PHX_M_Q_INBOUND_BYTES] = { "phx_queue_depth", "gauge", NULL, "queue=\"inbound_bytes\"" },
    [PHX_M_Q_SEND_BYTES] = { "phx_queue_depth", "gauge", NULL, "queue=\"send_bytes\"" },
    [PHX_M_HB_SENT] = { "phx_heartbeats_total", "counter", "failure-detector heartbeats", "direction=\"sent\"" },
    [PHX_M_HB_RECV] = { "phx_heartbeats_total", "counter", NULL, "direction=\"received\"" },
    [PHX_M_SUSPICIONS] = { "phx_suspicions_total", "counter", "failures this node's detector declared", NULL },
    [PHX_M_NODES_DEAD] = { "phx_nodes_dead", "gauge", "nodes this node knows dead (failure notices)", NULL },
    [PHX_M_FENCED] = { "phx_fenced", "gauge", "1 once this node was declared dead by the others", NULL },
    [PHX_M_AGREEMENTS] = { "phx_agreements_total", "counter", "agreements (ERA) decided", NULL },
    [PHX_M_TD_CTRL] = { "phx_td_control_messages_total", "counter",
                        "termination-detector control messages sent", NULL },
    [PHX_M_CKPT_COUNT] = { "phx_checkpoints_total", "counter", "checkpoints committed", NULL },
    [PHX_M_CKPT_BYTES] = { "phx_checkpoint_bytes_total", "counter", "checkpoint bytes written", NULL },
    [PHX_M_CKPT_LAST_NS] = { "phx_checkpoint_last_duration_seconds", "gauge",
                             "duration of the last checkpoint", NULL },
    [PHX_M_RECOVERIES] = { "phx_recoveries_total", "counter",
                           "recovery rounds completed here: global (every rank rolled back) or partial "
                           "(only the lost ranks' tasks)", "kind=\"global\"" },
    [PHX_M_RECOVERIES_PARTIAL] = { "phx_recoveries_total", "counter", NULL, "kind=\"partial\"" },
    [PHX_M_EPOCH] = { "phx_epoch", "gauge", "current checkpoint epoch", NULL },
    [PHX_M_LOG_BYTES] = { "phx_message_log_bytes", "gauge", "message log size (0 without logging)", NULL },
    [PHX_M_LOG_ENTRIES] = { "phx_message_log_entries", "gauge", "message log entries", NULL },
    [PHX_M_PROGRESS_DONE] = { "phx_progress_done", "gauge", "progress reported by phx_progress", NULL },
    [PHX_M_PROGRESS_TOTAL] = { "phx_progress_target", "gauge", "total reported by phx_progress (0: unknown)", NULL },
    [PHX_M_DELIVERIES] = { "phx_deliveries_total", "counter", "messages handed to task handlers", NULL },
    [PHX_M_TASKS] = { "phx_tasks_created_total", "counter", "tasks created on this node", NULL },
    [PHX_M_DROPPED_DEAD] = { "phx_messages_dropped_total", "counter",
                             "application messages not sent: the destination rank was declared dead",
                             "reason=\"peer_dead\"" },
    [PHX_M_TASKS_RESTORED] = { "phx_tasks_restored_total", "counter",
                               "tasks restored here from a checkpoint by recoveries", NULL },
    [PHX_M_MSGS_REPLAYED] = { "phx_messages_replayed_total", "counter",
                              "logged messages this node resent to replaying tasks (message logging)", NULL },
    [PHX_M_DETS] = { "phx_determinants_total", "counter", "delivery determinants made (message logging)", NULL },
    [PHX_M_LOGGED_BYTES] = { "phx_logged_bytes_total", "counter",
                             "payload bytes of messages logged by their sender (message logging)", NULL },
    [PHX_M_LOGGED_MSGS] = { "phx_logged_messages_total", "counter",
                            "messages logged by their sender (message logging)", NULL },
    [PHX_M_RANKS_FENCED] = { "phx_ranks_fenced_total", "counter",
                             "ranks this node fenced out: declared dead, their incarnation refused from then on",
                             NULL },
    [PHX_M_LINKS_RESTORED] = { "phx_links_restored_total", "counter",
                               "links to a live rank restored after their connection broke", NULL },
    [PHX_M_REJ_AUTH] = { "phx_frames_rejected_total", "counter",
                         "frames refused, by reason (the connection is closed, except for stale and "
                         "duplicate frames, which are dropped)", "reason=\"auth\"" },
    [PHX_M_REJ_CHECKSUM] = { "phx_frames_rejected_total", "counter", NULL, "reason=\"checksum\"" },
    [PHX_M_REJ_MALFORMED] = { "phx_frames_rejected_total", "counter", NULL, "reason=\"malformed\"" },
    [PHX_M_REJ_SEQUENCE] = { "phx_frames_rejected_total", "counter", NULL, "reason=\"sequence\"" },
    [PHX_M_REJ_STALE] = { "phx_frames_rejected_total", "counter", NULL, "reason=\"stale_incarnation\"" },
    [PHX_M_LOG_SUPPRESSED] = { "phx_log_lines_suppressed_total", "counter",
                               "log lines not printed by the rate limit (base/phx_log.h)", NULL },
    [PHX_M_DRAINS] = { "phx_drains_total", "counter",
                       "ranks that left by a drain (handed their tasks over at a checkpoint), as applied here",
                       NULL },
};

/* Histograms: one family per name; the phases share one with a label. */
static const struct {
    const char *name, *help, *label;
} hdefs[PHX_H_N] = {
    [PHX_H_CKPT_COMMIT] = { "phx_checkpoint_commit_seconds", "checkpoints, begin to commit", NULL },
    [PHX_H_REC_DETECT] = { "phx_recovery_phase_seconds",
                           "recovery phases: detect (last heard to failure notice), agree (notice to "
                           "decision), transfer (restores and the wait for every rank's), replay (message "
                           "logging)", "phase=\"detect\"" },
    [PHX_H_REC_AGREE] = { "phx_recovery_phase_seconds", NULL, "phase=\"agree\"" },
    [PHX_H_REC_TRANSFER] = { "phx_recovery_phase_seconds", NULL, "phase=\"transfer\"" },
    [PHX_H_REC_REPLAY] = { "phx_recovery_phase_seconds", NULL, "phase=\"replay\"" },
    [PHX_H_REC_TOTAL] = { "phx_recovery_seconds", "recoveries, the four phases together", NULL },
    [PHX_H_DETECT_LATENCY] = { "phx_detection_latency_seconds",
                               "failures: this node's last frame from the rank to its failure notice", NULL },
};
static const double hbounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define NB (sizeof hbounds / sizeof hbounds[0])
static _Atomic uint64_t hcount[PHX_H_N][NB + 1], hsum_ns[PHX_H_N];

void phx_metrics_observe(phx_hist_t h, uint64_t ns)
{
    if ((unsigned)h >= PHX_H_N)
        return;
    size_t b = 0;
    while (b < NB && (double)ns / 1e9 > hbounds[b])
        b++;
    atomic_fetch_add_explicit(&hcount[h][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hsum_ns[h], ns, memory_order_relaxed);
}

uint64_t phx_metrics_hist_count(phx_hist_t h)
{
    uint64_t k = 0;
    for (size_t b = 0; (unsigned)h < PHX_H_N && b <= NB; b++)
        k += atomic_load_explicit(&hcount[h][b], memory_order_relaxed);
    return k;
}
static _Atomic uint64_t vals[PHX_METRICS_MAX];
static int ndefs = PHX_M_NBUILTIN;

static struct {
    struct MHD_Daemon *d;
    uv_timer_t timer;
    int timer_open;
    int status_fd;              /* PHX_STATUS_FD, -1: none */
    char last[240];             /* last status line written */
    int rank;
} M = { .status_fd = -1 };

int phx_metrics_register(const char *name, const char *kind, const char *help)
{
    if (!name || !kind || (strcmp(kind, "counter") && strcmp(kind, "gauge")))
        return PHX_EINVAL;
    if (ndefs >= PHX_METRICS_MAX)
        return PHX_ENOSPC;
    defs[ndefs] = (mdef_t){ name, kind, help, NULL };
    return ndefs++;
}

void phx_metrics_add(int id, uint64_t v)
{
    if (id >= 0 && id < PHX_METRICS_MAX)
        atomic_fetch_add_explicit(&vals[id], v, memory_order_relaxed);
}

void phx_metrics_set(int id, uint64_t v)
{
    if (id >= 0 && id < PHX_METRICS_MAX)
        atomic_store_explicit(&vals[id], v, memory_order_relaxed);
}

uint64_t phx_metrics_get(int id)
{
    return id >= 0 && id < PHX_METRICS_MAX ? atomic_load_explicit(&vals[id], memory_order_relaxed) : 0;
}

static size_t render_one(char *buf, size_t cap, size_t o, int i)
{
    const mdef_t *d = &defs[i];
    uint64_t v = phx_metrics_get(i);
    int k;
    if (i == PHX_M_CKPT_LAST_NS)
        k = snprintf(buf + o, cap - o, "%s %.9f\n", d->name, (double)v / 1e9);
    else if (d->label)
        k = snprintf(buf + o, cap - o, "%s{%s} %llu\n", d->name, d->label, (unsigned long long)v);
    else
        k = snprintf(buf + o, cap - o, "%s %llu\n", d->name, (unsigned long long)v);
    return o + (k > 0 ? (size_t)k : 0);
}

static size_t render_hist(char *buf, size_t cap, size_t o, int h)
{
#define PUT(...) do { if (o < cap) o += (size_t)snprintf(buf + o, cap - o, __VA_ARGS__); } while (0)
    const char *l = hdefs[h].label, *sep = l ? "," : "";
    uint64_t cum = 0;
    for (size_t b = 0; b <= NB; b++) {
        cum += atomic_load_explicit(&hcount[h][b], memory_order_relaxed);
        if (b < NB)
            PUT("%s_bucket{%s%sle=\"%g\"} %llu\n", hdefs[h].name, l ? l : "", sep, hbounds[b],
                (unsigned long long)cum);
        else
            PUT("%s_bucket{%s%sle=\"+Inf\"} %llu\n", hdefs[h].name, l ? l : "", sep, (unsigned long long)cum);
    }
    double sum = (double)atomic_load_explicit(&hsum_ns[h], memory_order_relaxed) / 1e9;
    if (l) {
        PUT("%s_sum{%s} %.9f\n", hdefs[h].name, l, sum);
        PUT("%s_count{%s} %llu\n", hdefs[h].name, l, (unsigned long long)cum);
    } else {
        PUT("%s_sum %.9f\n", hdefs[h].name, sum);
        PUT("%s_count %llu\n", hdefs[h].name, (unsigned long long)cum);
    }
#undef PUT
    return o;
}

size_t phx_metrics_render(char *buf, size_t cap, int rank)
{
    size_t o = 0;
#define PUT(...) do { if (o < cap) o += (size_t)snprintf(buf + o, cap - o, __VA_ARGS__); } while (0)
    PUT("# HELP phx_node_rank rank of this node\n# TYPE phx_node_rank gauge\nphx_node_rank %d\n", rank);
    /* A family: the member with HELP, then every later member of the same
     * name (labelled, no HELP of its own), so HELP/TYPE come once and the
     * samples of a family stay together. */
    for (int i = 0; i < ndefs; i++) {
        const mdef_t *d = &defs[i];
        if (!d->help)
            continue;
        PUT("# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, d->kind);
        for (int j = i; j < ndefs && o < cap; j++)
            if (j == i || (!defs[j].help && !strcmp(defs[j].name, d->name)))
                o = render_one(buf, cap, o, j);
    }
    for (int h = 0; h < PHX_H_N; h++) {
        if (!hdefs[h].help)
            continue;
        PUT("# HELP %s %s\n# TYPE %s histogram\n", hdefs[h].name, hdefs[h].help, hdefs[h].name);
        for (int j = h; j < PHX_H_N && o < cap; j++)
            if (j == h || (!hdefs[j].help && !strcmp(hdefs[j].name, hdefs[h].name)))
                o = render_hist(buf, cap, o, j);
    }
#undef PUT
    if (o >= cap)
        o = cap ? cap - 1 : 0;
    return o;
}

/* ---- HTTP thread: reads the table only ---------------------------------- */

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_len, void **con_cls)
{
    (void)cls; (void)version; (void)upload; (void)con_cls;
    unsigned code = MHD_HTTP_OK;
    const char *text = NULL;
    char *body = NULL;
    size_t len = 0;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        text = "only GET /metrics\n";
    } else if (*upload_len) {
        code = MHD_HTTP_BAD_REQUEST;
        text = "no body expected\n";
    } else if (strcmp(url, "/metrics")) {
        code = MHD_HTTP_NOT_FOUND;
        text = "not found: try /metrics\n";
    } else {
        size_t cap = 65536;
        body = malloc(cap);
        if (!body)
            return MHD_NO;   /* closes the connection */
        len = phx_metrics_render(body, cap, M.rank);
    }
    struct MHD_Response *r = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
                                  : MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                                    MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            body ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- failures and recoveries ------------------------------------------- */

/* The recovery under way here: filled by phx_metrics_on_failure (detect)
 * and phx_metrics_recovered, reported on the status pipe by the timer once
 * complete (a replay that follows has ended). Comm thread, except the atomics
 * (replay_wait, go_ns, replay_ns, base_ns), which phx_metrics_replay_done
 * reads and writes from any thread. */
static struct {
    uint64_t detect_ns;          /* the round's first failure: last heard to notice */
    int have_detect;
    int pending;                 /* recovered, not yet reported */
    phx_metrics_rec_t r;
    char lost[128];
    uint64_t agree_ns, transfer_ns;
    _Atomic int replay_wait;     /* 1: the report waits for the replay's end */
    _Atomic uint64_t go_ns, replay_ns;
    _Atomic uint64_t base_ns;    /* detect + agree + transfer, for replay_done's total */
} REC;

void phx_metrics_on_failure(phx_node_t *n, int rank)
{
    uint64_t heard = phx_net_last_heard_ms(n->net, rank), now = uv_now(&n->loop);
    uint64_t ns = heard && now >= heard ? (now - heard) * 1000000u : 0;
    phx_metrics_add(PHX_M_RANKS_FENCED, 1);
    if (heard)
        phx_metrics_observe(PHX_H_DETECT_LATENCY, ns);
    if (!REC.have_detect) {   /* the round's detection: its first failure */
        REC.detect_ns = ns;
        REC.have_detect = 1;
    }
}

static void rec_report(phx_node_t *n);

void phx_metrics_recovered(const phx_metrics_rec_t *r)
{
    if (REC.pending)   /* a replay never reported: the new round replaces it */
        REC.pending = 0;
    phx_metrics_add(r->partial ? PHX_M_RECOVERIES_PARTIAL : PHX_M_RECOVERIES, 1);
    phx_metrics_set(PHX_M_EPOCH, r->epoch);
    phx_metrics_observe(PHX_H_REC_DETECT, REC.detect_ns);
    phx_metrics_observe(PHX_H_REC_AGREE, r->agree_ns);
    phx_metrics_observe(PHX_H_REC_TRANSFER, r->transfer_ns);
    REC.r = *r;
    REC.r.dead = NULL;
    size_t o = 0;
    REC.lost[0] = 0;
    for (int x = 0; r->dead && x < r->size && o < sizeof REC.lost - 12; x++)
        if (r->dead[x])
            o += (size_t)snprintf(REC.lost + o, sizeof REC.lost - o, "%s%d", o ? "," : "", x);
    REC.agree_ns = r->agree_ns;
    REC.transfer_ns = r->transfer_ns;
    atomic_store(&REC.replay_ns, 0);
    atomic_store(&REC.base_ns, REC.detect_ns + r->agree_ns + r->transfer_ns);
    atomic_store(&REC.go_ns, phx_now_ns());
    atomic_store(&REC.replay_wait, r->replay);
    REC.pending = 1;
    REC.have_detect = 0;
    if (!r->replay) {
        phx_metrics_observe(PHX_H_REC_REPLAY, 0);
        phx_metrics_observe(PHX_H_REC_TOTAL, REC.detect_ns + r->agree_ns + r->transfer_ns);
    }
}

void phx_metrics_replay_done(void)
{
    int one = 1;
    if (!atomic_compare_exchange_strong(&REC.replay_wait, &one, 2))
        return;   /* no round waits for it (an earlier round's replay, say) */
    uint64_t go = atomic_load(&REC.go_ns), now = phx_now_ns();
    uint64_t ns = now > go ? now - go : 0;
    atomic_store(&REC.replay_ns, ns);
    phx_metrics_observe(PHX_H_REC_REPLAY, ns);
    phx_metrics_observe(PHX_H_REC_TOTAL, atomic_load(&REC.base_ns) + ns);
}

/* On the status pipe, once the round is complete (phx_status.h):
 *   phx-rec 1 rank=R round=K epoch=E kind=partial|global lost=A,B detect_us=..
 *   agree_us=.. transfer_us=.. replay_us=.. */
static void rec_report(phx_node_t *n)
{
    if (!REC.pending || atomic_load(&REC.replay_wait) == 1)
        return;
    REC.pending = 0;
    if (M.status_fd < 0)
        return;
    char line[400];
    int len = snprintf(line, sizeof line,
                       "phx-rec 1 rank=%d round=%d epoch=%llu kind=%s lost=%s detect_us=%llu agree_us=%llu "
                       "transfer_us=%llu replay_us=%llu\n", n->rank, REC.r.round, (unsigned long long)REC.r.epoch,
                       REC.r.partial ? "partial" : "global", REC.lost[0] ? REC.lost : "-",
                       (unsigned long long)(REC.detect_ns / 1000), (unsigned long long)(REC.agree_ns / 1000),
                       (unsigned long long)(REC.transfer_ns / 1000),
                       (unsigned long long)(atomic_load(&REC.replay_ns) / 1000));
    if (len > 0 && (size_t)len < sizeof line) {
        ssize_t w = write(M.status_fd, line, (size_t)len);   /* below PIPE_BUF: atomic */
        (void)w;   /* a launcher that stopped reading loses the line, as with status lines */
    }
}

/* ---- comm thread: publishing and the status line ------------------------ */

static void publish(phx_node_t *n)
{
    phx_stats_t s;
    phx_get_stats(NULL, &s);
    phx_metrics_set(PHX_M_MSGS_SENT, s.msgs_sent);
    phx_metrics_set(PHX_M_MSGS_RECV, s.msgs_recv);
    phx_metrics_set(PHX_M_BYTES_SENT, s.bytes_sent);
    phx_metrics_set(PHX_M_BYTES_RECV, s.bytes_recv);
    phx_metrics_set(PHX_M_TD_CTRL, s.td_ctrl_msgs);
    phx_metrics_set(PHX_M_DELIVERIES, s.deliveries);
    phx_metrics_set(PHX_M_TASKS, s.tasks_created);
    int64_t w = atomic_load_explicit(&n->work, memory_order_relaxed);
    int64_t in = atomic_load_explicit(&n->inbound, memory_order_relaxed), out = 0;
    for (int r = 0; r < n->size; r++)
        out += atomic_load_explicit(&n->peer_out[r], memory_order_relaxed);
    phx_metrics_set(PHX_M_Q_WORK, w > 0 ? (uint64_t)w : 0);
    phx_metrics_set(PHX_M_Q_INBOUND_BYTES, in > 0 ? (uint64_t)in : 0);
    phx_metrics_set(PHX_M_Q_SEND_BYTES, out > 0 ? (uint64_t)out : 0);
    phx_ft_hb_stats_t hs;
    if (phx_ft_get_stats(n, &hs) == 0) {
        phx_metrics_set(PHX_M_HB_SENT, hs.sent[PHX_FT_HB_HEARTBEAT]);
        phx_metrics_set(PHX_M_HB_RECV, hs.recv[PHX_FT_HB_HEARTBEAT]);
        phx_metrics_set(PHX_M_SUSPICIONS, hs.declared);
    }
    pthread_mutex_lock(&n->dead_lock);
    phx_metrics_set(PHX_M_NODES_DEAD, (uint64_t)n->ndead);
    pthread_mutex_unlock(&n->dead_lock);
    if (n->net) {
        phx_net_counters_t nc;
        phx_net_counters(n->net, &nc);
        phx_metrics_set(PHX_M_LINKS_RESTORED, nc.links_restored);
        phx_metrics_set(PHX_M_REJ_AUTH, nc.rejected[PHX_NET_REJ_AUTH]);
        phx_metrics_set(PHX_M_REJ_CHECKSUM, nc.rejected[PHX_NET_REJ_CHECKSUM]);
        phx_metrics_set(PHX_M_REJ_MALFORMED, nc.rejected[PHX_NET_REJ_MALFORMED]);
        phx_metrics_set(PHX_M_REJ_SEQUENCE, nc.rejected[PHX_NET_REJ_SEQUENCE]);
        phx_metrics_set(PHX_M_REJ_STALE, nc.rejected[PHX_NET_REJ_STALE]);
    }
    phx_metrics_set(PHX_M_LOG_SUPPRESSED, phx_log_suppressed_total());
}

/* One line per change, at most every PUBLISH_MS, non-blocking: a launcher
 * that stops reading loses status lines, never stalls the comm thread. */
static void status_line(phx_node_t *n)
{
    if (M.status_fd < 0)
        return;
    char line[sizeof M.last];
    int len = snprintf(line, sizeof line, "phx-status 1 rank=%d done=%llu total=%llu dead=%llu epoch=%llu "
                       "rec=%llu fenced=%llu inc=%u pid=%d ckpts=%llu\n", n->rank,
                       (unsigned long long)phx_metrics_get(PHX_M_PROGRESS_DONE),
                       (unsigned long long)phx_metrics_get(PHX_M_PROGRESS_TOTAL),
                       (unsigned long long)phx_metrics_get(PHX_M_NODES_DEAD),
                       (unsigned long long)phx_metrics_get(PHX_M_EPOCH),
                       (unsigned long long)(phx_metrics_get(PHX_M_RECOVERIES) +
                                            phx_metrics_get(PHX_M_RECOVERIES_PARTIAL)),
                       (unsigned long long)phx_metrics_get(PHX_M_FENCED), (unsigned)n->inc, (int)getpid(),
                       (unsigned long long)phx_metrics_get(PHX_M_CKPT_COUNT));
    if (len <= 0 || (size_t)len >= sizeof line || !strcmp(line, M.last))
        return;
    /* Shorter than PIPE_BUF: the write is atomic among the nodes sharing the pipe. */
    ssize_t w = write(M.status_fd, line, (size_t)len);
    if (w == len) {
        memcpy(M.last, line, (size_t)len + 1);
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        PHX_WARN(SUB, "status fd %d: %s; no more status lines", M.status_fd, strerror(errno));
        close(M.status_fd);
        M.status_fd = -1;
    }
}

static void on_timer(uv_timer_t *t)
{
    phx_node_t *n = t->data;
    publish(n);
    status_line(n);
    rec_report(n);
}

int phx_metrics_start(phx_node_t *n)
{
    M.rank = n->rank;
    const char *fd = getenv("PHX_STATUS_FD");
    if (fd && *fd) {
        char *end;
        long v = strtol(fd, &end, 10);
        if (*end || v < 3 || fcntl((int)v, F_GETFD) < 0) {
            fprintf(stderr, "phalanx: rank %d: PHX_STATUS_FD='%s' is not an open descriptor above 2\n",
                    n->rank, fd);
            return PHX_EINVAL;
        }
        M.status_fd = (int)v;
        fcntl(M.status_fd, F_SETFD, FD_CLOEXEC);
        fcntl(M.status_fd, F_SETFL, fcntl(M.status_fd, F_GETFL) | O_NONBLOCK);
    }
    if (n->cfg.metrics_port > 0) {
        int port = n->cfg.metrics_port + n->rank;
        if (port > 65535) {
            fprintf(stderr, "phalanx: rank %d: metrics-port %d + rank is above 65535\n", n->rank,
                    n->cfg.metrics_port);
            return PHX_EINVAL;
        }
        M.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL, NULL,
                               answer, NULL,
                               MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)8,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5,
                               MHD_OPTION_END);
        if (!M.d) {
            fprintf(stderr, "phalanx: rank %d: cannot serve metrics on port %d (metrics-port=%d + rank): "
                            "%s\n", n->rank, port, n->cfg.metrics_port, strerror(errno));
            return PHX_EIO;
        }
        phx_evlog("metrics", "\"port\":%d", port);
    }
    if (M.status_fd < 0 && !M.d)
        return 0;
    int rc = uv_timer_init(&n->loop, &M.timer);
    if (rc) {
        fprintf(stderr, "phalanx: rank %d: metrics timer: %s\n", n->rank, uv_strerror(rc));
        return PHX_EIO;
    }
    M.timer.data = n;
    M.timer_open = 1;
    uv_unref((uv_handle_t *)&M.timer);   /* never what keeps the loop alive */
    uv_timer_start(&M.timer, on_timer, 0, PUBLISH_MS);
    return 0;
}

static void closed(uv_handle_t *h) { (void)h; }

void phx_metrics_stop(phx_node_t *n)
{
    if (n->exit_code == PHX_EXIT_FENCED)
        phx_metrics_set(PHX_M_FENCED, 1);
    if (!M.timer_open)
        return;
    on_timer(&M.timer);   /* the last state, e.g. fenced or all done */
    M.timer_open = 0;
    uv_close((uv_handle_t *)&M.timer, closed);
}

void phx_metrics_free(phx_node_t *n)
{
    (void)n;
    if (M.d)
        MHD_stop_daemon(M.d);
    M.d = NULL;
    if (M.status_fd >= 0)
        close(M.status_fd);
    M.status_fd = -1;
}

/* ---- progress (public API) ---------------------------------------------- */

/* Event-log lines at most every 20 ms per node, plus the final one: enough
 * for the timeline, cheap for a program that reports every iteration. */
void phx_progress(phx_ctx_t *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    static _Atomic uint64_t last_ns;
    phx_metrics_set(PHX_M_PROGRESS_DONE, done);
    phx_metrics_set(PHX_M_PROGRESS_TOTAL, total);
    if (!phx_evlog_enabled())
        return;
    uint64_t now = phx_now_ns(), prev = atomic_load_explicit(&last_ns, memory_order_relaxed);
    if ((total && done >= total) ||
        (now - prev >= 20000000u &&
         atomic_compare_exchange_strong_explicit(&last_ns, &prev, now, memory_order_relaxed,
                                                 memory_order_relaxed)))
        phx_evlog("progress", "\"done\":%llu,\"total\":%llu", (unsigned long long)done,
                  (unsigned long long)total);
}

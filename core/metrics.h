/* Node metrics: a table of counters and gauges, served as Prometheus text
 * on /metrics (metrics-port=P: rank r listens on P + r, all interfaces) and
 * summarised for the launcher's status line on the fd in PHX_STATUS_FD.
 *
 * Threads and ownership:
 *   - the table is a static array of _Atomic uint64_t, written with relaxed
 *     stores/adds and read with relaxed loads; no lock anywhere;
 *   - the HTTP server is libmicrohttpd with its own internal thread
 *     (MHD_USE_INTERNAL_POLLING_THREAD). That thread ONLY READS the table:
 *     it never touches the node, its libuv handles or its queues;
 *   - the comm thread runs a libuv timer (every 250 ms) that copies the
 *     counters it owns (transport, detector, dead list, worker sums) into
 *     the table and writes the status line;
 *   - phx_metrics_add/set/get: any thread, any time (also before start).
 *
 * A malformed request is answered 400 by libmicrohttpd, an oversized one
 * 431/413 or closed (16 KiB per connection, 8 connections, 5 s idle
 * timeout), a method other than GET/HEAD 405, a path other than /metrics
 * 404. None of it reaches the node. */
#ifndef PHX_METRICS_H
#define PHX_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_node phx_node_t;

/* Well-known metrics. Each is written by the code that does the work:
 * checkpointing (core/cr*.c), message logging (core/mlog.c), agreement
 * (core/agree.c), the failure path (phx_metrics_on_failure), the outbox,
 * and the publishing timer below for what it copies from transport,
 * detector and workers. */
typedef enum phx_metric {
    PHX_M_MSGS_SENT, PHX_M_MSGS_RECV, PHX_M_BYTES_SENT, PHX_M_BYTES_RECV,
    PHX_M_Q_WORK, PHX_M_Q_INBOUND_BYTES, PHX_M_Q_SEND_BYTES,
    PHX_M_HB_SENT, PHX_M_HB_RECV, PHX_M_SUSPICIONS, PHX_M_NODES_DEAD, PHX_M_FENCED,
    PHX_M_AGREEMENTS, PHX_M_TD_CTRL,
    PHX_M_CKPT_COUNT, PHX_M_CKPT_BYTES, PHX_M_CKPT_LAST_NS,
    PHX_M_RECOVERIES, PHX_M_EPOCH,
    PHX_M_LOG_BYTES, PHX_M_LOG_ENTRIES,
    PHX_M_PROGRESS_DONE, PHX_M_PROGRESS_TOTAL,
    PHX_M_DELIVERIES, PHX_M_TASKS,
    PHX_M_RECOVERIES_PARTIAL,   /* PHX_M_RECOVERIES counts the global ones */
    PHX_M_DROPPED_DEAD, PHX_M_TASKS_RESTORED, PHX_M_MSGS_REPLAYED,
    PHX_M_DETS, PHX_M_LOGGED_BYTES, PHX_M_LOGGED_MSGS,
    PHX_M_RANKS_FENCED, PHX_M_LINKS_RESTORED,
    PHX_M_REJ_AUTH, PHX_M_REJ_CHECKSUM, PHX_M_REJ_MALFORMED, PHX_M_REJ_SEQUENCE, PHX_M_REJ_STALE,
    PHX_M_LOG_SUPPRESSED,
    PHX_M_DRAINS,
    PHX_M_NBUILTIN
} phx_metric_t;

#define PHX_METRICS_MAX 64   /* built-in + registered */

/* Registers an extra metric (kind "counter" or "gauge"; name and help are
 * static strings, name a valid Prometheus name). Before phx_main only (the
 * table is read without locks afterwards). Returns its id or PHX_ENOSPC /
 * PHX_EINVAL. */
int phx_metrics_register(const char *name, const char *kind, const char *help);
void phx_metrics_add(int id, uint64_t v);
void phx_metrics_set(int id, uint64_t v);
uint64_t phx_metrics_get(int id);

/* Histograms (seconds, fixed buckets from 1 ms to 60 s): observed by the
 * code that measures, any thread. */
typedef enum phx_hist {
    PHX_H_CKPT_COMMIT,       /* a checkpoint, begin to commit */
    PHX_H_REC_DETECT, PHX_H_REC_AGREE, PHX_H_REC_TRANSFER, PHX_H_REC_REPLAY,   /* recovery phases */
    PHX_H_REC_TOTAL,         /* the four together */
    PHX_H_DETECT_LATENCY,    /* last heard from a rank to its failure notice */
    PHX_H_N
} phx_hist_t;
void phx_metrics_observe(phx_hist_t h, uint64_t ns);
/* Count and sum (ns) of a histogram's observations. Any thread. */
uint64_t phx_metrics_hist_count(phx_hist_t h);

/* Comm thread, when a failure notice reaches the runtime: detection
 * latency (this node's last frame from rank to now), the fenced-ranks count,
 * and the detection phase of the recovery that follows. */
void phx_metrics_on_failure(phx_node_t *n, int rank);

/* A recovery round ended on this node (comm thread, workers about to
 * resume). partial: a partial rollback (only the lost ranks' tasks went
 * back), else global. agree_ns: failure notice to decision; transfer_ns:
 * decision to resume (restores and the wait for every rank's). replay:
 * 1 when a replay phase follows here (message logging after a partial
 * round), ended by phx_metrics_replay_done. Observes the histograms, bumps
 * the counters, and reports the round on the status pipe (phx_status.h). */
typedef struct phx_metrics_rec {
    uint64_t epoch;
    int round;                 /* failures of the job so far (the round's id) */
    int partial, replay;
    uint64_t agree_ns, transfer_ns;
    const unsigned char *dead; /* size flags: the ranks lost in this round */
    int size;
} phx_metrics_rec_t;
void phx_metrics_recovered(const phx_metrics_rec_t *r);
/* The replay after a partial round ended here. Any thread. */
void phx_metrics_replay_done(void);

/* Comm thread, at startup: starts the HTTP server when metrics-port is set
 * (0, or a negative code after logging why: the port is taken, say) and
 * the publishing timer. */
int phx_metrics_start(phx_node_t *n);
/* Comm thread, when the job ends: closes the timer (uv_close). */
void phx_metrics_stop(phx_node_t *n);
/* After the loop ended: stops the HTTP thread. */
void phx_metrics_free(phx_node_t *n);
/* Renders the exposition text into buf; returns its length (truncated at
 * cap - 1). Any thread. */
size_t phx_metrics_render(char *buf, size_t cap, int rank);

#endif

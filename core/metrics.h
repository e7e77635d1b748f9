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

/* Well-known metrics. Modules that do not exist yet (checkpointing,
 * recovery, message logging) feed theirs through phx_metrics_add/set; until
 * then they read 0. */
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

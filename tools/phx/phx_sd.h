/* phx run --metrics-sd FILE: a Prometheus file_sd target list of the job's
 * nodes, one target group per rank:
 *   [{"targets":["HOST:PORT"],"labels":{"rank":"R","host":"HOST","incarnation":"I"}}, ...]
 * PORT is metrics-port + rank (the node's /metrics). A rank that died is
 * left out until it runs again (respawned: its new incarnation). The file is
 * replaced atomically (rename), so Prometheus never reads half of it.
 * Single-threaded: the launcher's poll loop. */
#ifndef PHX_SD_H
#define PHX_SD_H

/* 0, or -1 after saying why (no metrics port: the nodes serve nothing). */
int phx_sd_open(const char *path, int metrics_port);
/* Rewrites the file when a rank's state or incarnation changed. */
void phx_sd_update(void);
void phx_sd_close(void);

#endif

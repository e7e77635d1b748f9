/* Node configuration.
 *
 * Every option has one key, settable three ways, in this order of
 * precedence: command-line flag `--phx-KEY=VALUE` (removed from argv before
 * the program sees it), environment variable `PHX_KEY` (upper case, '-' as
 * '_'), and a config file (`--phx-config=FILE` or PHX_CONFIG) of
 * `key = value` lines with '#' comments. The launcher supplies the job's
 * identity (PHX_RANK, PHX_SIZE, PHX_PEERS, PHX_JOB_ID) through the
 * environment only.
 *
 * Single-threaded: parse once in phx_main before any thread starts. */
#ifndef PHX_CONFIG_H
#define PHX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_peer_addr {
    char host[256];
    int port;
} phx_peer_addr_t;

typedef struct phx_config {
    /* identity, from the launcher */
    int rank, size;
    uint64_t job_id;
    phx_peer_addr_t *peers;          /* size entries; owned, freed by phx_config_free */
    /* options */
    int workers;                     /* worker threads; default ncpu-1, min 1 */
    int busy_poll;                   /* spin instead of sleeping */
    int linger_us;                   /* yield-spin this long before parking */
    int startup_timeout_ms;          /* give up connecting after this */
    int64_t send_buffer;             /* per-peer queued bytes before senders block */
    int64_t recv_buffer;             /* undelivered inbound bytes before reads pause */
    int64_t max_frame;               /* largest accepted payload */
    char td[16];                     /* termination detector name */
    int ft;                          /* fault tolerance on/off */
    int hb_timeout_ms;               /* delta: suspicion timeout */
    int hb_period_ms;                /* eta: heartbeat period (0: delta/10) */
    char eventlog[512];              /* JSON-lines event log path ("" = off) */
    char log[16];                    /* error|warn|info|debug */
} phx_config_t;

/* Parses argv (removing --phx-* flags in place; *argc updated), the
 * environment and the config file. Returns 0, or a negative code after
 * printing a message naming the bad key or value. */
int phx_config_load(phx_config_t *cfg, int *argc, char **argv);
void phx_config_free(phx_config_t *cfg);
/* Prints every option with its value and source, for --phx-help. */
void phx_config_usage(void);

#endif

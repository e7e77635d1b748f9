/* Node configuration.
 *
 * Every option has one key, settable three ways, in this order of
 * precedence: command-line flag `--phx-KEY=VALUE` (removed from argv before
 * the program sees it), environment variable `PHX_KEY` (upper case, '-' as
 * '_'), and a config file (`--phx-config=FILE` or PHX_CONFIG) of
 * `key = value` lines with '#' comments. The launcher supplies the job's
 * identity (PHX_RANK, PHX_SIZE, PHX_PEERS, PHX_JOB_ID) through the
 * environment only; under srun without it, phx_slurm_identity derives them
 * from Slurm's step variables.
 *
 * Single-threaded: parse once in phx_main before any thread starts. */
#ifndef PHX_CONFIG_H
#define PHX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "net/net_cfg.h"

typedef phx_net_addr_t phx_peer_addr_t;   /* the transport's, so peers pass down as they are */

/* recovery: none, cr, or a message-logging mode layered on cr (mlog-*);
 * UNKNOWN is reported by phx_recovery_configure (core/recovery.h). */
enum phx_rec_family { PHX_REC_NONE, PHX_REC_CR, PHX_REC_MLOG, PHX_REC_UNKNOWN };
/* restart-on; UNKNOWN is reported by the recovery mode that reads it. */
enum phx_restart_on { PHX_RESTART_SURVIVORS, PHX_RESTART_SPARE, PHX_RESTART_RESPAWN, PHX_RESTART_UNKNOWN };
/* Which termination detection runs: the detector named by td (its
 * registry, ft/termination/registry.c, reports a bad name), none (jobs end
 * by phx_exit), or cr's own check on its consistent cuts (ft/ckpt/quiet.h).
 * UNSUPPORTED: td names a detector the recovery mode cannot run beside it
 * (reported by that mode). */
enum phx_td_mode { PHX_TD_DETECTOR, PHX_TD_NONE, PHX_TD_CUT, PHX_TD_UNSUPPORTED };

typedef struct phx_config {
    /* identity, from the launcher */
    int rank, size;
    uint64_t job_id;
    phx_peer_addr_t *peers;          /* size entries; owned, freed by phx_config_free */
    int listen_fd;                   /* PHX_LISTEN_FD: a listening socket phx run bound to this
                                      * rank's port and handed down (close-on-exec from here on;
                                      * the transport takes it); -1: bind the port */
    /* options */
    int workers;                     /* worker threads: auto (ncpu-1, min 1), or 0: inline mode */
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
    /* recovery (core/recovery.h) */
    char recovery[24];               /* a mode core/main.c lists (core/recovery.h) */
    int mlog_team_size;              /* recovery=mlog-team: nodes per team (>= 1) */
    int ckpt_interval;               /* seconds between automatic checkpoints (0: none) */
    char ckpt_dir[512];              /* disk checkpoints ("" = memory only) */
    char restart_on[16];             /* survivors|spare|respawn */
    int spares;                      /* the last `spares` ranks hold no tasks until one stands in */
    int recovery_helpers;            /* hosts per lost rank's tasks on the survivors (0: every live rank) */
    char restart[512];               /* restart from the disk checkpoint in this dir */
    int metrics_port;                /* /metrics on this + rank (0: off) */
    int keep_going;                  /* an uncovered failure: survivors finish first (0: end at once) */
    char drain_on[8];                /* term|off: what SIGTERM does under a mode that drains */
    /* Derived by phx_config_load from the names above, the one place mode
     * names are compared; the runtime tests these (and a recovery mode's
     * variant is its ops table, core/recovery.h). */
    enum phx_rec_family rec_family;
    enum phx_restart_on restart_mode;
    enum phx_td_mode td_mode;        /* the detector that runs, after the recovery mode's say */
    int drain_term;                  /* drain-on=term */
} phx_config_t;

/* Parses argv (removing --phx-* flags in place; *argc updated), the
 * environment and the config file. Returns 0, or a negative code after
 * printing a message naming the bad key or value. */
int phx_config_load(phx_config_t *cfg, int *argc, char **argv);
/* What a node started with argv would read, checked without starting one,
 * for the launcher: the --phx-* flags of argv (either spelling; argv is
 * left as it is), the environment and the config file, against the same
 * table phx_config_load uses, then the settings that cannot take effect
 * together (--restart or ckpt-* without a checkpointing mode, a recovery
 * mode without ft, workers above phx_config_max_workers(cpus) when cpus >
 * 0, metrics-port + size - 1 above 65535 when size > 0). Fills cfg (no
 * identity; nothing to free). Returns 0, or PHX_EINVAL after one message on
 * stderr (with a "did you mean" for a near miss). --phx-help is skipped. */
int phx_config_check(int argc, char *const *argv, int cpus, int size, phx_config_t *cfg);
/* 2 when arg is --phx-KEY without '=' and next is its value (--phx-KEY
 * VALUE): always for a key that takes a value, for an on/off key only when
 * next is one of 1/0, on/off, true/false, yes/no; else 1. Pure. */
int phx_config_flag_arity(const char *arg, const char *next);
/* The most worker threads a node accepts on a host with cpus CPUs: 8 per
 * CPU, at least 64 (each is a thread with its own queues). Pure. */
int phx_config_max_workers(int cpus);
/* A lost rank comes back and is taken in again: restart-on=respawn under
 * cr or a message-logging mode built on it. */
int phx_config_respawns(const phx_config_t *cfg);
void phx_config_free(phx_config_t *cfg);

/* Default worker count: this node's share of its host's CPUs, less one
 * for its comm thread, at least 1. cpus: CPUs in the affinity mask (a
 * container's cpuset, else the host's); local: nodes on this host
 * (PHX_LOCAL_SIZE); bound: each node was given its own CPUs already
 * (srun --cpu-bind: SLURM_CPU_BIND_TYPE other than none), so the mask is
 * the share and is not divided again. Pure. */
int phx_config_default_workers(int cpus, int local, int bound);

/* Reads one "SECRET\n" line from fd a byte at a time, so nothing after it
 * is consumed (for PHX_SECRET_STDIN=1 the rest of stdin is the launcher's
 * lifeline). 0, or PHX_EIO at end of file, PHX_ENOSPC past cap, PHX_EINVAL
 * if empty; each with a message on stderr. Blocking; startup only. */
int phx_config_read_secret(int fd, uint8_t *out, size_t cap, size_t *len);
/* Prints every option, its default and what a valid value looks like, to
 * stdout, for --phx-help. */
void phx_config_usage(void);

#endif

/* Process side of the phx launcher: spawning nodes, relaying their output,
 * reaping them, forwarding signals and deciding the job's exit code. */
#ifndef PHX_RUN_H
#define PHX_RUN_H

#include "base/place/phx_place.h"

#define PHX_RUN_LINE_MAX (64 * 1024)   /* longer lines are split */
#define PHX_RUN_SECRET_MAX 1024        /* what a node accepts (core/node.c) */

typedef struct {
    phx_ranktab_t *rt;      /* each listen_fd goes to its node at its first start, and is
                             * closed here then (a respawn binds the port again) */
    char **argv;            /* PROGRAM ARGS..., NULL-terminated */
    const char *prog_path;  /* argv[0] resolved for local ranks */
    char **rsh;             /* remote shell argv prefix, NULL-terminated */
    int abort_on_failure;
    double grace;           /* seconds between SIGTERM and SIGKILL */
    const char *pidfile;    /* NULL: none */
    int quiet;              /* no status line (phx_status.h) */
    const char *secret;     /* PHX_SECRET, sent to remote nodes as the first line of their
                             * stdin (never on a command line); NULL: PHX_SECRET_FILE */
    int respawn;            /* restart-on=respawn: restarts per rank of a node that died
                             * (signal or fenced), same host, incarnation + 1; 0: none */
    const char **exports;   /* -x names, NULL-terminated (or NULL): set on remote nodes too */
    int ft;                 /* --phx-ft as the nodes read it: a node killed by a signal may be
                             * survived; without it the job's code says it (128 + signal) */
} phx_job_t;

/* Runs the job to completion; returns the launcher's exit status. The
 * environment common to all nodes must already be set in environ. */
int phx_run_job(const phx_job_t *job);

/* Shell-quotes s for a remote POSIX shell; malloc'ed. */
char *phx_shell_quote(const char *s);

#endif

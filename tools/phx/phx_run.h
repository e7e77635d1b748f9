/* Process side of the phx launcher: spawning nodes, relaying their output,
 * reaping them, forwarding signals and deciding the job's exit code. */
#ifndef PHX_RUN_H
#define PHX_RUN_H

#include "phx_hostfile.h"

#define PHX_RUN_LINE_MAX (64 * 1024)   /* longer lines are split */

typedef struct {
    const phx_ranktab_t *rt;
    char **argv;            /* PROGRAM ARGS..., NULL-terminated */
    const char *prog_path;  /* argv[0] resolved for local ranks */
    char **rsh;             /* remote shell argv prefix, NULL-terminated */
    int abort_on_failure;
    double grace;           /* seconds between SIGTERM and SIGKILL */
    const char *pidfile;    /* NULL: none */
} phx_job_t;

/* Runs the job to completion; returns the launcher's exit status. The
 * environment common to all nodes must already be set in environ. */
int phx_run_job(const phx_job_t *job);

/* Shell-quotes s for a remote POSIX shell; malloc'ed. */
char *phx_shell_quote(const char *s);

#endif

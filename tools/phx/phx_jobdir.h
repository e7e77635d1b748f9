/* The launcher's view of a running job, for people in other shells.
 *
 * phx run keeps one record per rank (host, pid, incarnation, state, and
 * what the node reports on the status pipe: progress, epoch, checkpoints,
 * recoveries) and every recovery with its phases. It writes them to a job
 * directory, $XDG_RUNTIME_DIR/phx/PID or else /tmp/phx-UID/PID (PID: the
 * launcher's; mode 0700), as two files replaced atomically (rename):
 *   state.json   the record, for scripts (phx status --json prints it);
 *   status.txt   the same for people (phx status prints it).
 * They are rewritten at most every 250 ms while something changed, and
 * removed when the job ends. `phx status [JOB]` reads them: JOB is the
 * launcher's pid or the directory; without it, the running job started
 * last (one whose launcher is alive).
 *
 * Single-threaded: the launcher's poll loop (through phx_status.c). */
#ifndef PHX_JOBDIR_H
#define PHX_JOBDIR_H

#include "base/place/phx_place.h"

#include <stdint.h>
#include <sys/types.h>

#define PHX_JD_MAXREC 64   /* recoveries kept (the latest) */

typedef struct phx_jd_rank {
    const char *host;
    int local;
    pid_t pid;              /* the node's own pid when it reported it, else the launcher's child */
    unsigned inc;           /* incarnation: respawns so far */
    int state;              /* PHX_JD_* */
    int code;               /* exit code or signal number, by state */
    uint64_t done, total, epoch, rec, ckpts;
    int reported;
    char lost_why[32];      /* the last abnormal end: "SIGKILL", "fenced", ... ("": none) */
    double lost_at;         /* when (phx_jobdir_now), -1: never */
} phx_jd_rank_t;

enum { PHX_JD_STARTING, PHX_JD_UP, PHX_JD_KILLED, PHX_JD_FENCED, PHX_JD_LOST, PHX_JD_EXITED };

typedef struct phx_jd_rec {
    double at;              /* seconds since the job started, when reported */
    int round;
    uint64_t epoch;
    int partial;
    char lost[64];          /* "2" or "2,5" */
    double detect_ms, agree_ms, transfer_ms, replay_ms;
    int reports;            /* nodes that reported it */
} phx_jd_rec_t;

typedef struct phx_jobview {
    int n;
    phx_jd_rank_t *r;
    phx_jd_rec_t rec[PHX_JD_MAXREC];
    int nrec;               /* recoveries so far (rec holds the last PHX_JD_MAXREC) */
    double t0;              /* CLOCK_MONOTONIC start */
    double wall0;           /* CLOCK_REALTIME start */
    const char *prog;
    int changed;
} phx_jobview_t;

/* The job's record, NULL before phx_jobdir_open. */
phx_jobview_t *phx_jobdir_view(void);

/* Creates the record and the directory (a failure to create the directory
 * is said once and the job runs without it). announce: print where it is. */
int phx_jobdir_open(const phx_ranktab_t *rt, const char *prog, int announce);
void phx_jobdir_spawned(int rank, pid_t pid, unsigned inc);
void phx_jobdir_exited(int rank, int wait_status);
/* A "phx-status 1 ..." line from a node. */
void phx_jobdir_node_line(const char *line);
/* Writes the files when due (or now with force). */
void phx_jobdir_flush(int force);
/* Removes the directory. */
void phx_jobdir_close(void);

/* `phx status [--json] [JOB]`: returns the exit status. */
int phx_status_cmd(int argc, char **argv);
/* `phx drain RANK [JOB]`: SIGTERM to a local rank's node (found in the job
 * directory's state.json), which drains under drain-on=term. */
int phx_drain_cmd(int argc, char **argv);

double phx_jobdir_now(void);   /* CLOCK_MONOTONIC seconds */

#endif

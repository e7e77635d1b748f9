/* phx run's status line: nodes up, dead and fenced, epoch, recoveries and
 * the job's progress with a rate and an ETA.
 *
 * Nodes report on a pipe shared by the local nodes: the write end is their
 * fd 3 and PHX_STATUS_FD=3 says so (core/metrics.c writes it). Each report
 * is one line shorter than PIPE_BUF, so lines of different nodes never mix:
 *   phx-status 1 rank=R done=D total=T dead=K epoch=E rec=N fenced=F inc=I pid=P ckpts=C
 * (a new field may be appended; a reader ignores unknown ones), and once
 * per recovery round, when it ended on that node (core/metrics.c):
 *   phx-rec 1 rank=R round=K epoch=E kind=partial|global lost=A,B detect_us=..
 *     agree_us=.. transfer_us=.. replay_us=..
 * which phx_events.h turns into one line per recovery. Remote nodes get no
 * such fd: over ssh the line shows only what the launcher sees.
 *
 * On a terminal (stderr) the line is redrawn in place; otherwise a plain
 * line goes out when a node dies or is fenced and every
 * PHX_STATUS_INTERVAL seconds (default 10, 0: never); quiet: nothing.
 *
 * Single-threaded: the launcher's poll loop owns it. */
#ifndef PHX_STATUS_H
#define PHX_STATUS_H

typedef struct phx_status phx_status_t;

/* NULL when nothing can be shown (the job runs regardless). quiet: no
 * status line; the nodes' reports still feed the job record (phx_jobdir.h)
 * and the recovery lines. The line fits 80 columns (or the terminal's
 * width): the progress part shortens first. */
phx_status_t *phx_status_open(int nranks, int quiet);
int phx_status_rfd(const phx_status_t *s);   /* poll for POLLIN; -1 if none */
int phx_status_wfd(const phx_status_t *s);   /* the nodes' end (CLOEXEC); -1 if none */
/* Reads the node lines available now. */
void phx_status_read(phx_status_t *s);
/* A local or remote node's process ended with wait status st. */
void phx_status_exited(phx_status_t *s, int rank, int st);
/* rank runs again (restart-on=respawn). */
void phx_status_respawned(phx_status_t *s, int rank);
/* Before other output on the terminal: erases the live line. */
void phx_status_hide(phx_status_t *s);
/* Redraws when due. Returns the ms until the next redraw is due. */
int phx_status_tick(phx_status_t *s);
/* The final line, then frees s. */
void phx_status_close(phx_status_t *s);

#endif

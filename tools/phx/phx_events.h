/* One line per recovery from phx run, built from the nodes' reports on the
 * status pipe ("phx-rec 1 ..." lines, phx_status.h) and what the launcher
 * saw of the lost ranks:
 *   phx: rank 5 lost (SIGKILL, 127.0.0.1) at 12.3 s · rolled back to epoch 9 ·
 *        recovered in 41 ms (detect 15, agree 1, transfer 3, replay 22)
 * (one line). The failure itself has its line when the launcher reaps the
 * node (phx_run.c). A round's line goes out once every local node up has
 * reported it, or REPORT_WAIT_S after the first report. Phases in ms: detect
 * is the lowest any node saw (the lost rank's closest observer), the others
 * the highest (the round ends when the slowest node resumes).
 *
 * Link warnings a node prints ("WARN net: ...") about a rank already lost ("connection to
 * rank 2 lost", "handshake with rank 2 failed", ...) belong to that failure:
 * they are folded into its recovery line as a count, or printed as they
 * come with PHX_VERBOSE=1 (phx run --verbose). A link warning about a rank
 * not known lost yet waits HOLD_S (0.5 s) for the launcher to reap it, and
 * is printed then if it was not lost.
 *
 * Single-threaded: the launcher's poll loop. Uses the job record
 * (phx_jobdir.h) for hosts, states and the recoveries list. */
#ifndef PHX_EVENTS_H
#define PHX_EVENTS_H

#include <stddef.h>

void phx_events_open(int verbose);
/* A "phx-rec 1 ..." line from a node. */
void phx_events_rec_line(const char *line);
/* 1: the node's output line is a link warning about a lost rank, folded
 * (not to be printed). */
int phx_events_fold(int src, const char *line, size_t len);
/* 1 when phx_events_tick would print (the caller hides a live status line first). */
int phx_events_due(void);
/* Prints the recovery lines and held warnings that are due. Returns ms until the next is. */
int phx_events_tick(void);
/* At the job's end: prints what is pending. */
void phx_events_close(void);

#endif

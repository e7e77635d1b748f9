/* JSON-lines event log (PHX_EVENTLOG / --phx-eventlog; "%r" becomes the
 * rank). One object per line: {"t":<CLOCK_REALTIME ns>,"rank":R,"ev":"..",...}.
 * Realtime, not monotonic, so logs of different processes and the chaos
 * tool's kill log share one clock. Each line is flushed at once: a node
 * killed with SIGKILL leaves a complete log up to its death. The consumers
 * and the event names are documented in tools/chaos/README.md.
 *
 * Any thread (a mutex serialises lines). Without an open log, calls return
 * at once. */
#ifndef PHX_EVENTLOG_H
#define PHX_EVENTLOG_H

/* Opens the log; 0, or a negative code after printing why. */
int phx_evlog_open(const char *pattern, int rank);
int phx_evlog_enabled(void);
/* Appends {"t":..,"rank":..,"ev":ev[,extra]}; extra is printf-formatted
 * JSON members without braces, e.g. "\"dead\":%d". */
void phx_evlog(const char *ev, const char *extra_fmt, ...) __attribute__((format(printf, 2, 3)));
void phx_evlog_close(void);

#endif

/* Checks of `phx run`'s own options and of the job they describe, made
 * once in the launcher before any node starts: mpirun's spellings, slots
 * against ranks, host names, exported variables and the runtime's --phx-*
 * options (against the nodes' own table, core/config.h). Each check that
 * fails prints one message on stderr and returns 2, the usage-error code. */
#ifndef PHX_OPTS_H
#define PHX_OPTS_H

#include "base/place/phx_place.h"

#include <stddef.h>

/* mpirun's "-np" and charmrun's "+pN" as phx's own "--np" / "--np=N"
 * (buf holds the latter); any other argument is returned as it is. */
const char *phx_opts_respell(const char *arg, char *buf, size_t cap);

/* The CPUs this launcher may run on (its affinity mask): the local slots. */
int phx_opts_cpus(void);

/* More ranks than slots: one line naming the slots (none with
 * oversubscribe); over PHX_OPTS_PER_SLOT per slot, or more local ranks
 * than RLIMIT_NPROC, is refused unless oversubscribe. cores: the slots are
 * this host's cores (the local default), for the message. 0 or 2. */
#define PHX_OPTS_PER_SLOT 8
int phx_opts_check_slots(int nranks, int nlocal, int slots, int cores, int oversubscribe);

/* rsh is ssh (by its file name): every remote host of rt must resolve, so
 * a typo is named as such rather than as a lost connection. 0 or 2. */
int phx_opts_resolve(const phx_ranktab_t *rt, const char *rsh);

/* -x VAR[=VALUE]: sets VAR here when VALUE is given (local nodes inherit
 * it) and appends VAR to the NULL-terminated list *names (the list and
 * each name malloc'ed) that remote nodes get explicitly. 0, 2, or 1
 * when out of memory. */
int phx_opts_export(const char *spec, const char ***names, int *n);

/* The --phx-* options nodes started with prog (PROGRAM ARGS... then the
 * flags given before PROGRAM, NULL-terminated) would read from it, the
 * environment and a config file, checked against the nodes' own table and
 * for settings that cannot take effect, for a job of size nodes; cpus > 0
 * also bounds --phx-workers (every node on this host). *ft: the job's
 * fault tolerance setting; *respawn: restart-on=respawn. 0 or 2 (1: out
 * of memory). */
int phx_opts_check_runtime(char **prog, int size, int cpus, int *ft, int *respawn);

#endif

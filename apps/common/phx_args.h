/* Command-line helpers shared by the example apps: whole-string numbers
 * with ranges, one usage message per job that names the bad option, and
 * --help. Every node of a job parses the same argv, so messages are printed
 * by rank 0 only (or by a process started without phx). The checks return
 * 0, or 2 (the usage-error exit code) after the message on stderr, so an
 * app writes `if (phx_args_int(...)) return 2;`. */
#ifndef PHX_ARGS_H
#define PHX_ARGS_H

#include <stdint.h>

typedef struct {
    const char *prog;       /* "jacobi" */
    const char *usage;      /* the usage line after "usage: " */
    const char *help;       /* more lines for --help (may be NULL) */
} phx_args_t;

/* 1 when argv has --help (before any "--"): the usage and help went to
 * stdout, and the app exits 0. */
int phx_args_help(const phx_args_t *a, int argc, char **argv);

/* The number of arguments at argv[i] that belong to the runtime: 1 or 2 for
 * --phx-KEY=VALUE or --phx-KEY VALUE (as phx_main reads them), else 0. */
int phx_args_runtime(int argc, char **argv, int i);

/* "PROG: MESSAGE" and the usage line, on stderr; returns 2. */
int phx_args_bad(const phx_args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* argv[i] is an option that needs a value: 0 when argv[i + 1] exists. */
int phx_args_need(const phx_args_t *a, int argc, char **argv, int i);

/* s, all of it, as a number in [lo, hi], for option opt (named in the
 * message; "N" or the like for a positional argument). */
int phx_args_u64(const phx_args_t *a, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int phx_args_int(const phx_args_t *a, const char *opt, const char *s, int lo, int hi, int *out);
int phx_args_dbl(const phx_args_t *a, const char *opt, const char *s, double lo, double hi, double *out);

#endif

/* busy: keeps every worker of every node busy for a while, then ends the
 * job. A load generator for failure-detection tests: heartbeats must keep
 * flowing while the CPUs are saturated, and nodes may die meanwhile.
 *
 * Usage: busy [--hold-until FILE] SECONDS [CHUNK_MS] [TASKS_PER_NODE]
 *   --hold-until FILE  the job also lasts until FILE exists (rank 0 looks,
 *                   once a chunk): a test's go signal. A test that kills a
 *                   node mid-job runs `busy --hold-until GATE 0`, kills,
 *                   then creates GATE: the kill lands inside the job
 *                   whatever the load (tests/integration/lib.sh);
 *   SECONDS         job length, measured by rank 0's main task (may be
 *                   fractional);
 *   CHUNK_MS        how long one message spins a worker (default 10);
 *   TASKS_PER_NODE  spinning tasks per node (default: twice the node's
 *                   worker count as PHX_WORKERS / the runtime's default
 *                   gives it, so that every worker gets at least one task
 *                   with high probability: tasks are pinned to workers by a
 *                   hash of their id). 0 = idle run: no spinners, and the
 *                   main task sleeps its chunks instead of spinning.
 *
 * Every node logs the event "busy_spin" (JSON event log, PHX_EVENTLOG)
 * when its first spinner starts: a test waits for N of them to know that
 * every node is working. An idle run (0 tasks) has no spinners and logs
 * none; wait for the runtime's "start" events then (PHX_FT=1).
 *
 * Each spinner spins CHUNK_MS per message and sends itself the next one,
 * so it needs nothing from any other node: spinners on a dead node just
 * vanish, and the job ends when rank 0's main task calls phx_exit(0).
 * Fault tolerance is not required; with PHX_FT=1 the job survives the loss
 * of any node but rank 0. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/phalanx.h"
#include "apps/common/phx_args.h"

enum { T_TICK };

typedef struct spin_st { uint64_t chunk_ns; } spin_st_t;
typedef struct main_st { uint64_t t0, end, chunk_ns; double secs; int idle; } main_st_t;

static int spin_type, main_type;
/* Parsed in main() on every node, before phx_main: read-only afterwards. */
static struct { double secs, chunk_ms; int tasks; const char *hold; } opt = { 10.0, 10.0, -1, NULL };
static _Atomic int spinning;   /* this node logged busy_spin */

static void spin_for(uint64_t ns)
{
    uint64_t t0 = phx_now_ns();
    while (phx_now_ns() - t0 < ns)
        ;
}

static void sleep_for(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0)
        ;   /* EINTR: sleep the rest */
}

static void spin_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    spin_st_t *s = st;
    (void)len;
    s->chunk_ns = *(const uint64_t *)arg;
    if (!atomic_exchange(&spinning, 1))
        phx_evlog("busy_spin", NULL);
    int rc = phx_send(c, phx_self(c), T_TICK, NULL, 0);
    if (rc)
        fprintf(stderr, "busy: rank %d: spinner cannot start: send to self failed (%d)\n", phx_rank(c), rc);
}

static void on_spin(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    spin_st_t *s = st;
    (void)src; (void)m; (void)n;
    spin_for(s->chunk_ns);
    int rc = phx_send(c, phx_self(c), T_TICK, NULL, 0);
    if (rc)
        fprintf(stderr, "busy: rank %d: spinner stopped: send to self failed (%d)\n", phx_rank(c), rc);
}

/* Worker count of a node as the runtime would choose it (core/config.c):
 * PHX_WORKERS, else cores - 1, at least 1. All nodes run on this machine
 * in the tests; on other machines this is only a spawn-count hint. */
static int workers_hint(void)
{
    const char *w = getenv("PHX_WORKERS");
    int k = w ? atoi(w) : 0;
    if (k > 0)
        return k;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 1 ? (int)n - 1 : 1;
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    main_st_t *s = st;
    (void)arg; (void)len;
    s->secs = opt.secs;
    int tasks = opt.tasks >= 0 ? opt.tasks : 2 * workers_hint();
    s->chunk_ns = (uint64_t)(opt.chunk_ms * 1e6);
    s->t0 = phx_now_ns();
    s->end = s->t0 + (uint64_t)(s->secs * 1e9);
    s->idle = tasks == 0;
    for (int r = 0; r < phx_size(c); r++)
        for (int i = 0; i < tasks; i++)
            if (phx_spawn_on(c, spin_type, r, &s->chunk_ns, sizeof s->chunk_ns) == PHX_TID_NONE)
                fprintf(stderr, "busy: cannot spawn a spinner on rank %d\n", r);
    phx_send(c, phx_self(c), T_TICK, NULL, 0);
}

/* The main task is a spinner with a deadline: no timers needed. */
static void on_main_tick(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    main_st_t *s = st;
    (void)src; (void)m; (void)n;
    uint64_t now = phx_now_ns();
    if (now >= s->end && (!opt.hold || access(opt.hold, F_OK) == 0)) {
        int dead[64];
        int k = phx_failed_nodes(dead, 64);
        printf("busy: done after %g s (%.2f s measured, %d nodes, %d failed)\n", s->secs,
               (double)(now - s->t0) / 1e9, phx_size(c), k);
        fflush(stdout);
        phx_exit(c, 0);
        return;
    }
    uint64_t left = now < s->end ? s->end - now : s->chunk_ns, d = left < s->chunk_ns ? left : s->chunk_ns;
    if (s->idle)
        sleep_for(d);
    else
        spin_for(d);
    int rc = phx_send(c, phx_self(c), T_TICK, NULL, 0);
    if (rc) {
        fprintf(stderr, "busy: main task cannot continue: send to self failed (%d)\n", rc);
        phx_exit(c, 1);
    }
}

/* Spinners on a dead node just vanish and the result (the time spent and
 * the failure count) does not depend on them: busy handles failures
 * itself, so a job that lost nodes may still end with 0. */
static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)node; (void)inc; (void)when_ns;
}

static const phx_args_t ARGS = {
    "busy", "busy [--hold-until FILE] SECONDS [CHUNK_MS] [TASKS_PER_NODE]",
    "  every core busy for SECONDS, in CHUNK_MS slices (default 10) of TASKS_PER_NODE\n"
    "  tasks; --hold-until waits for FILE first. e.g. busy 8, busy 2.5 10 4,\n"
    "  busy --hold-until /tmp/go 0\n"
};

static int usage(const char *why)
{
    return phx_args_bad(&ARGS, "%s", why);
}

static int parse_num(const char *a, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(a, &end);
    if (errno || end == a || *end || !(v >= lo) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

/* Runtime flags (--phx-*) are left to phx_main; the rest is ours. */
static int parse(int argc, char **argv)
{
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        double v;
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (!strcmp(a, "--hold-until")) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return usage("--hold-until needs a FILE");
            opt.hold = argv[++i];
        } else if (a[0] == '-' && a[1] == '-') {
            return phx_args_bad(&ARGS, "unknown option '%s'", a);
        } else if (npos == 0) {
            if (parse_num(a, 0, &opt.secs))
                return usage("SECONDS must be a number >= 0");
            npos++;
        } else if (npos == 1) {
            if (parse_num(a, 0, &opt.chunk_ms) || opt.chunk_ms <= 0)
                return usage("CHUNK_MS must be a number > 0");
            npos++;
        } else if (npos == 2) {
            if (parse_num(a, 0, &v) || v != (int)v || v > 100000)
                return usage("TASKS_PER_NODE must be a whole number 0..100000");
            opt.tasks = (int)v;
            npos++;
        } else {
            return usage("too many arguments");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (phx_on_failure(on_failure, NULL)) {
        fprintf(stderr, "busy: cannot register the failure callback\n");
        return 1;
    }
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    int rc = parse(argc, argv);
    if (rc)
        return rc;
    phx_type_t sp = { .name = "busy.spin", .state_size = sizeof(spin_st_t), .init = spin_init,
                      .handlers = { [T_TICK] = on_spin } };
    phx_type_t mt = { .name = "busy.main", .state_size = sizeof(main_st_t), .init = main_init,
                      .handlers = { [T_TICK] = on_main_tick } };
    spin_type = phx_register_type(&sp);
    main_type = phx_register_type(&mt);
    if (spin_type < 0 || main_type < 0) {
        fprintf(stderr, "busy: cannot register task types\n");
        return 1;
    }
    return phx_main(argc, argv, main_type, NULL, 0);
}

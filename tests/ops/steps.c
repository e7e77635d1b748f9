/* steps: every node walks STEPS steps of STEP_MS of CPU each and reports
 * them with phx_progress; the job ends when every node finished or died.
 * The test program for the status line, /metrics and tools/timeline.
 *
 * Usage: steps [--hold-until FILE] [--hold-rank R --hold-at K] [--hold-all K]
 *              STEPS STEP_MS
 *   --hold-until FILE  the job does not end before FILE exists (a gate);
 *   --hold-rank R, --hold-at K
 *                      rank R stops after step K until FILE exists and logs
 *                      "steps_hold": a test kills it there, inside the work;
 *   --hold-all K       every rank stops after step K until FILE exists, so
 *                      the rest of the work comes after what the test did.
 * Prints "steps: F of N nodes finished S steps, D failed". Failures are
 * handled (phx_on_failure): a dead node's steps are simply not done, and the
 * line says so. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/phalanx.h"

enum { T_TICK, T_DONE };

typedef struct { uint64_t step; phx_tid_t main; } step_st_t;
typedef struct { int done; } main_st_t;

static int step_type;
static struct { uint64_t steps, step_ms; long hold_rank, hold_at, hold_all; const char *gate; } opt = { 0, 0, -1, -1, -1, NULL };

static int gate_open(void) { return !opt.gate || access(opt.gate, F_OK) == 0; }

static void nap(void)
{
    struct timespec ts = { 0, 5000000 };
    nanosleep(&ts, NULL);
}

static void on_step(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    step_st_t *s = st;
    (void)src; (void)m; (void)n;
    int held = phx_rank(c) == opt.hold_rank && s->step == (uint64_t)opt.hold_at;
    if ((held || s->step == (uint64_t)opt.hold_all) && !gate_open()) {
        static int said;
        if (held && !said++)
            phx_evlog("steps_hold", "\"step\":%llu", (unsigned long long)s->step);
        nap();
    } else {
        uint64_t t0 = phx_now_ns();
        while (phx_now_ns() - t0 < opt.step_ms * 1000000u)
            ;
        phx_progress(c, ++s->step, opt.steps);
    }
    int rc = s->step < opt.steps ? phx_send(c, phx_self(c), T_TICK, NULL, 0)
                                 : phx_send(c, s->main, T_DONE, NULL, 0);
    if (rc)
        fprintf(stderr, "steps: rank %d: send failed (%d)\n", phx_rank(c), rc);
}

static void step_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)len;
    memcpy(&((step_st_t *)st)->main, arg, sizeof(phx_tid_t));
    phx_progress(c, 0, opt.steps);
    phx_send(c, phx_self(c), T_TICK, NULL, 0);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    phx_tid_t me = phx_self(c);
    for (int r = 0; r < phx_size(c); r++)
        if (phx_spawn_on(c, step_type, r, &me, sizeof me) == PHX_TID_NONE)
            fprintf(stderr, "steps: cannot spawn on rank %d\n", r);
    phx_send(c, phx_self(c), T_TICK, NULL, 0);
}

/* Polls: a node that dies sends nothing, so the end is decided by count. */
static void on_main_tick(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    main_st_t *s = st;
    (void)src; (void)m; (void)n;
    int dead[256];
    int k = phx_failed_nodes(dead, 256);
    if (s->done + k >= phx_size(c) && gate_open()) {
        printf("steps: %d of %d nodes finished %llu steps, %d failed\n", s->done, phx_size(c),
               (unsigned long long)opt.steps, k);
        fflush(stdout);
        phx_exit(c, 0);
        return;
    }
    nap();
    phx_send(c, phx_self(c), T_TICK, NULL, 0);
}

static void on_done(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)c; (void)src; (void)m; (void)n;
    ((main_st_t *)st)->done++;
}

static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)node; (void)inc; (void)when_ns;   /* on_main_tick counts them */
}

int main(int argc, char **argv)
{
    static const char usage[] = "steps [--hold-until FILE] [--hold-rank R --hold-at K] [--hold-all K] STEPS STEP_MS";
    int i = 1;
    uint64_t v;
    for (; i + 1 < argc && !strncmp(argv[i], "--hold-", 7); i += 2) {
        if (!strcmp(argv[i], "--hold-until"))
            opt.gate = argv[i + 1];
        else if (!strcmp(argv[i], "--hold-rank") && !phx_arg_u64(argv[i + 1], 0, 65535, &v))
            opt.hold_rank = (long)v;
        else if (!strcmp(argv[i], "--hold-at") && !phx_arg_u64(argv[i + 1], 0, 1u << 30, &v))
            opt.hold_at = (long)v;
        else if (!strcmp(argv[i], "--hold-all") && !phx_arg_u64(argv[i + 1], 0, 1u << 30, &v))
            opt.hold_all = (long)v;
        else
            return phx_usage_error(usage, "steps: bad option %s %s", argv[i], argv[i + 1]);
    }
    if (i + 2 > argc || phx_arg_u64(argv[i], 1, 1u << 30, &opt.steps) ||
        phx_arg_u64(argv[i + 1], 0, 60000, &opt.step_ms))
        return phx_usage_error(usage, "steps: want STEPS (>= 1) and STEP_MS");
    if ((opt.hold_rank >= 0) != (opt.hold_at >= 0) || (opt.hold_rank >= 0 && !opt.gate))
        return phx_usage_error(usage, "steps: --hold-rank and --hold-at go together, with --hold-until");
    if (opt.hold_all >= 0 && !opt.gate)
        return phx_usage_error(usage, "steps: --hold-all needs --hold-until");
    phx_type_t stt = { .name = "step", .state_size = sizeof(step_st_t), .init = step_init,
                       .handlers = { [T_TICK] = on_step } };
    step_type = phx_register_type(&stt);
    phx_type_t mt = { .name = "main", .state_size = sizeof(main_st_t), .init = main_init,
                      .handlers = { [T_TICK] = on_main_tick, [T_DONE] = on_done } };
    int main_type = phx_register_type(&mt);
    phx_on_failure(on_failure, NULL);
    return phx_main(argc, argv, main_type, NULL, 0);
}

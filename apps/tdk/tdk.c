/* tdk: termination-detection kernels. See tdk.h and ft/termination/README.md.
 *
 * Usage: tdk [--map spawn|rr|random|subtree] [--work US] [--hold FILE] KERNEL ARGS
 *   tdk ring HOPS                 one token, HOPS hops around the nodes
 *   tdk walk HOPS QB SEED         random walk, each hop forks with prob. QB;
 *                                 HOPS hops in total over all walkers
 *   tdk project THRESH [SEED]     adaptive refinement of e^-2x on [-10,10]
 *   --hold FILE                   (project) leaves hold their results until
 *                                 FILE exists: a test's go signal (hold.c)
 *
 * The node that sees the end prints the kernel's result line with
 * last_task_ns= (CLOCK_MONOTONIC) and last_task_rt_ns= (CLOCK_REALTIME, to
 * compare with the event log's td_declare time). After the job ends every
 * node prints a "tdk-node:" line with its own counters and last task time,
 * which is what the scripts use when a failure cut a result short. */
#include "apps/tdk/tdk.h"
#include "apps/common/phx_args.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/phx_err.h"

tdk_opts_t tdk_opt = { .map = TDK_MAP_SPAWN, .seed = 1 };
tdk_counters_t tdk_cnt;

static int main_type;
static phx_tid_t main_tid;

uint64_t tdk_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load(a);
    while (cur < v && !atomic_compare_exchange_weak(a, &cur, v))
        ;
}

void tdk_task_end(uint64_t *mono, uint64_t *rt)
{
    uint64_t m = phx_now_ns(), r = tdk_realtime_ns();
    atomic_fetch_add(&tdk_cnt.handlers, 1);
    atomic_max(&tdk_cnt.last_ns, m);
    atomic_max(&tdk_cnt.last_rt_ns, r);
    if (mono)
        *mono = m;
    if (rt)
        *rt = r;
}

void tdk_spin(void)
{
    if (!tdk_opt.work_ns)
        return;
    uint64_t end = phx_now_ns() + tdk_opt.work_ns;
    while (phx_now_ns() < end)
        ;
}

int tdk_live(int node, int size)
{
    int dead[64];
    int k = phx_failed_nodes(dead, 64);
    if (k <= 0)
        return node;
    if (k > 64)
        k = 64;
    /* At most size steps: if every node were dead we would not be running. */
    for (int step = 0; step < size; step++, node = (node + 1) % size) {
        int is_dead = 0;
        for (int i = 0; i < k; i++)
            is_dead |= dead[i] == node;
        if (!is_dead)
            return node;
    }
    return node;
}

static void report(phx_ctx_t *c, const char *what, phx_tid_t dst, int rc)
{
    atomic_fetch_add(&tdk_cnt.lost, 1);
    fprintf(stderr, "tdk: rank %d: %s to task %#" PRIx64 " (rank %d) failed: %s\n", phx_rank(c), what,
            dst, phx_tid_home(dst), phx_strerror(rc));
}

int tdk_send(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    int rc = phx_send(c, dst, tag, buf, len);
    if (rc < 0)
        report(c, "send", dst, rc);
    return rc;
}

int tdk_spawn_on(phx_ctx_t *c, int type, int node, const void *arg, size_t len, phx_tid_t *out)
{
    phx_tid_t t = tdk_opt.map == TDK_MAP_SPAWN && node < 0 ? phx_spawn(c, type, arg, len)
                                                          : phx_spawn_on(c, type, node, arg, len);
    if (out)
        *out = t;
    if (t == PHX_TID_NONE) {
        report(c, "spawn", PHX_TID_NONE, PHX_EINVAL);
        return PHX_EINVAL;
    }
    return 0;
}

/* ---- main task ---------------------------------------------------------- */

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    main_tid = phx_self(c);
    tdk_gate_start(c);
    if (!strcmp(tdk_opt.kernel, "ring"))
        tdk_ring_start(c);
    else if (!strcmp(tdk_opt.kernel, "walk"))
        tdk_walk_start(c, main_tid);
    else
        tdk_project_start(c, main_tid);
    tdk_task_end(NULL, NULL);
}

static void main_result(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)st; (void)src;
    if (!strcmp(tdk_opt.kernel, "walk"))
        tdk_walk_result(c, m, n);
    else
        tdk_project_result(c, m, n);
    phx_task_done(c);
}

/* ---- command line --------------------------------------------------------- */

static const phx_args_t ARGS = {
    "tdk", "tdk [--map spawn|rr|random|subtree] [--work US] [--hold FILE] ring HOPS\n"
           "       tdk [...] walk HOPS QB SEED\n"
           "       tdk [...] project THRESH [SEED]",
    "  termination-detection kernels: a token ring, a random walk that forks with\n"
    "  probability QB, a projection that spawns until a value drops below THRESH\n"
};

static int usage(const char *why)
{
    return phx_args_bad(&ARGS, "%s", why);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-')
        return PHX_EINVAL;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return PHX_EINVAL;
    *out = v;
    return 0;
}

/* Runtime options (--phx-*) are left for phx_main; everything else is ours. */
static int parse(int argc, char **argv)
{
    const char *pos[4];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if ((!strcmp(a, "--map") || !strcmp(a, "--work") || !strcmp(a, "--hold")) && i + 1 >= argc)
            return usage("--map, --work and --hold need a value");
        if (!strcmp(a, "--map") && i + 1 < argc) {
            const char *m = argv[++i];
            if (!strcmp(m, "spawn")) tdk_opt.map = TDK_MAP_SPAWN;
            else if (!strcmp(m, "rr")) tdk_opt.map = TDK_MAP_RR;
            else if (!strcmp(m, "random")) tdk_opt.map = TDK_MAP_RANDOM;
            else if (!strcmp(m, "subtree")) tdk_opt.map = TDK_MAP_SUBTREE;
            else return usage("unknown --map");
        } else if (!strcmp(a, "--work") && i + 1 < argc) {
            uint64_t us;
            if (parse_u64(argv[++i], &us) || us > 10000000)
                return usage("bad --work (microseconds, <= 10 s)");
            tdk_opt.work_ns = us * 1000;
        } else if (!strcmp(a, "--hold") && i + 1 < argc) {
            tdk_opt.hold = argv[++i];
        } else if (a[0] == '-' && a[1] == '-') {
            return phx_args_bad(&ARGS, "unknown option '%s'", a);
        } else if (npos < 4) {
            pos[npos++] = a;
        } else {
            return usage("too many arguments");
        }
    }
    if (npos < 1)
        return usage("missing kernel");
    tdk_opt.kernel = pos[0];
    if (!strcmp(pos[0], "ring")) {
        if (npos != 2 || parse_u64(pos[1], &tdk_opt.hops) || !tdk_opt.hops)
            return usage("ring HOPS (HOPS >= 1)");
    } else if (!strcmp(pos[0], "walk")) {
        if (npos != 4 || parse_u64(pos[1], &tdk_opt.hops) || !tdk_opt.hops ||
            parse_double(pos[2], &tdk_opt.qb) || !(tdk_opt.qb >= 0 && tdk_opt.qb <= 1) ||
            parse_u64(pos[3], &tdk_opt.seed))
            return usage("walk HOPS QB SEED (HOPS >= 1, 0 <= QB <= 1)");
    } else if (!strcmp(pos[0], "project")) {
        if (npos < 2 || npos > 3 || parse_double(pos[1], &tdk_opt.thresh) || !(tdk_opt.thresh > 0) ||
            (npos == 3 && parse_u64(pos[2], &tdk_opt.seed)))
            return usage("project THRESH [SEED] (THRESH > 0)");
    } else {
        return usage("unknown kernel");
    }
    if (tdk_opt.hold && strcmp(pos[0], "project"))
        return usage("--hold applies to project only");
    return 0;
}

int main(int argc, char **argv)
{
    /* Types first, identically everywhere; the kernel choice only decides
     * which of them the main task uses. */
    if (tdk_ring_register() < 0 || tdk_walk_register() < 0 || tdk_project_register() < 0 ||
        tdk_gate_register() < 0) {
        fprintf(stderr, "tdk: registering task types failed\n");
        return 1;
    }
    phx_type_t mt = { .name = "tdk-main", .init = main_init,
                      .handlers = { [TDK_T_RESULT] = main_result } };
    main_type = phx_register_type(&mt);
    if (main_type < 0) {
        fprintf(stderr, "tdk: registering the main type failed: %s\n", phx_strerror(main_type));
        return 1;
    }
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    int rc = parse(argc, argv);
    if (rc)
        return rc;
    /* Workaround, not policy: the runtime leaves SIGPIPE at its default, so
     * a node still writing to a peer that already ended the job dies of
     * SIGPIPE at the very end (about 1 run in 15 of project 1e-9 on 8
     * nodes). A write error is handled by the transport anyway. Belongs in
     * phx_main. */
    signal(SIGPIPE, SIG_IGN);
    rc = phx_main(argc, argv, main_type, NULL, 0);
    const char *r = getenv("PHX_RANK");
    printf("tdk-node: rank=%s rc=%d kernel=%s handlers=%" PRIu64 " hops=%" PRIu64 " leaves=%" PRIu64
           " lost=%" PRIu64 " last_task_ns=%" PRIu64 " last_task_rt_ns=%" PRIu64 "\n",
           r ? r : "0", rc, tdk_opt.kernel, atomic_load(&tdk_cnt.handlers), atomic_load(&tdk_cnt.hops),
           atomic_load(&tdk_cnt.leaves), atomic_load(&tdk_cnt.lost), atomic_load(&tdk_cnt.last_ns),
           atomic_load(&tdk_cnt.last_rt_ns));
    fflush(stdout);
    return rc;
}

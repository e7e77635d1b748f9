/* pingpong: latency, message rate and bandwidth between rank 0 and rank 1.
 * Usage: pingpong lat  [ITERS=20000] [SIZE=8]
 *        pingpong rate [COUNT=2000000] [SIZE=8]
 *        pingpong bw   [COUNT=2000] [SIZE=1048576]
 * Prints one line: "pingpong MODE size=S n=N <figure>". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "apps/common/phx_args.h"

enum { T_START, T_PING, T_PONG, T_DATA, T_ACK };
enum { M_LAT, M_RATE, M_BW };

typedef struct cfg { int mode; uint64_t n; uint32_t size; phx_tid_t peer; } cfg_t;
typedef struct st {
    cfg_t cfg;
    uint64_t i, t0, got;
    uint64_t *rtt;
    uint8_t *buf;
} st_t;

#define PP_USAGE "pingpong lat|rate|bw [N] [SIZE]   (N >= 1, SIZE in bytes up to 1 GiB)"

static int pp_type, main_type;
static cfg_t pp_cfg = { .mode = M_LAT, .n = 20000, .size = 8 };

/* On every node before phx_main: a bad argument stops the job at once. */
static const phx_args_t ARGS = { "pingpong", PP_USAGE,
                                 "  lat: round trips of SIZE bytes; rate: a one-way stream of N messages;\n"
                                 "  bw: N messages of SIZE bytes (default 1 MiB)\n" };

static int parse(int argc, char **argv)
{
    int k = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (k == 0 && !strcmp(a, "rate")) {
            pp_cfg.mode = M_RATE;
            pp_cfg.n = 2000000;
        } else if (k == 0 && !strcmp(a, "bw")) {
            pp_cfg.mode = M_BW;
            pp_cfg.n = 2000;
            pp_cfg.size = 1 << 20;
        } else if (k == 0 && strcmp(a, "lat")) {
            return phx_args_bad(&ARGS, "unknown mode '%s' (lat, rate or bw)", a);
        } else if (k == 1 || k == 2) {
            if (phx_args_u64(&ARGS, k == 1 ? "N" : "SIZE", a, k == 1 ? 1 : 0, k == 1 ? UINT64_MAX : 1u << 30, &v))
                return 2;
            if (k == 1)
                pp_cfg.n = v;
            else
                pp_cfg.size = (uint32_t)v;
        } else if (k > 2) {
            return phx_args_bad(&ARGS, "unexpected argument '%s'", a);
        }
        k++;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void pp_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    st_t *s = st;
    (void)c; (void)len;
    s->cfg = *(const cfg_t *)arg;
    s->buf = calloc(1, s->cfg.size ? s->cfg.size : 1);
}

static void pp_fini(void *st)
{
    st_t *s = st;
    free(s->buf);
    free(s->rtt);
}

static void finish(phx_ctx_t *c, st_t *s)
{
    double el = (double)(phx_now_ns() - s->t0);
    const char *names[] = { "lat", "rate", "bw" };
    if (s->cfg.mode == M_LAT) {
        qsort(s->rtt, s->cfg.n, sizeof *s->rtt, cmp_u64);
        printf("pingpong lat size=%u n=%" PRIu64 " median_us=%.2f p10_us=%.2f p90_us=%.2f\n",
               s->cfg.size, s->cfg.n, s->rtt[s->cfg.n / 2] / 1e3, s->rtt[s->cfg.n / 10] / 1e3,
               s->rtt[s->cfg.n * 9 / 10] / 1e3);
    } else if (s->cfg.mode == M_RATE) {
        printf("pingpong rate size=%u n=%" PRIu64 " msgs_per_s=%.0f\n", s->cfg.size, s->cfg.n,
               (double)s->cfg.n / (el / 1e9));
    } else {
        printf("pingpong bw size=%u n=%" PRIu64 " MiB_per_s=%.1f\n", s->cfg.size, s->cfg.n,
               (double)s->cfg.n * s->cfg.size / (el / 1e9) / (1 << 20));
    }
    (void)names;
    fflush(stdout);
    phx_exit(c, 0);
}

static void on_start(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    st_t *s = st;
    (void)src; (void)n;
    s->cfg.peer = *(const phx_tid_t *)m;
    s->t0 = phx_now_ns();
    if (s->cfg.mode == M_LAT) {
        s->rtt = calloc(s->cfg.n, sizeof *s->rtt);
        s->i = 0;
        s->t0 = phx_now_ns();
        phx_send(c, s->cfg.peer, T_PING, s->buf, s->cfg.size);
        return;
    }
    /* Stream: the runtime's send buffer bounds what is in flight. */
    for (uint64_t i = 0; i < s->cfg.n; i++)
        phx_send(c, s->cfg.peer, T_DATA, s->buf, s->cfg.size);
}

static void on_ping(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)st;
    phx_send(c, src, T_PONG, m, n);
}

static void on_pong(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    st_t *s = st;
    (void)src; (void)m; (void)n;
    uint64_t now = phx_now_ns();
    s->rtt[s->i++] = now - s->t0;
    if (s->i == s->cfg.n) {
        finish(c, s);
        return;
    }
    s->t0 = phx_now_ns();
    phx_send(c, s->cfg.peer, T_PING, s->buf, s->cfg.size);
}

static void on_data(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    st_t *s = st;
    (void)m; (void)n;
    if (++s->got == s->cfg.n)
        phx_send(c, src, T_ACK, NULL, 0);
}

static void on_ack(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src; (void)m; (void)n;
    finish(c, st);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st; (void)arg; (void)len;
    if (phx_size(c) < 2) {
        fprintf(stderr, "pingpong needs 2 nodes\n");
        phx_exit(c, 2);
        return;
    }
    cfg_t cfg = pp_cfg;
    phx_tid_t a = phx_spawn_on(c, pp_type, 0, &cfg, sizeof cfg);
    phx_tid_t b = phx_spawn_on(c, pp_type, 1, &cfg, sizeof cfg);
    phx_send(c, a, T_START, &b, sizeof b);
    phx_task_done(c);
}

int main(int argc, char **argv)
{
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    int rc = parse(argc, argv);
    if (rc)
        return rc;
    phx_type_t pt = { .name = "pingpong", .state_size = sizeof(st_t), .init = pp_init, .fini = pp_fini,
                      .handlers = { [T_START] = on_start, [T_PING] = on_ping, [T_PONG] = on_pong,
                                    [T_DATA] = on_data, [T_ACK] = on_ack } };
    phx_type_t mt = { .name = "main", .init = main_init };
    pp_type = phx_register_type(&pt);
    main_type = phx_register_type(&mt);
    return phx_main(argc, argv, main_type, NULL, 0);
}

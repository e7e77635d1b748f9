/* ring: a token passed around N nodes for K laps.
 * Usage: ring [LAPS]   (LAPS from 1 to 10^12, default 1000) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "apps/common/phx_args.h"

enum { T_SETUP, T_TOKEN, T_DONE };

typedef struct token { uint64_t lap, hops; } token_t;
typedef struct ring_st { phx_tid_t next, main; uint64_t laps; int first; } ring_st_t;
typedef struct main_st { uint64_t t0, laps; } main_st_t;
typedef struct spawn_arg { phx_tid_t next, main; uint64_t laps; int first; } spawn_arg_t;

#define RING_USAGE "ring [LAPS]   (LAPS from 1 to 10^12, default 1000)"

static int ring_type, main_type;
static uint64_t ring_laps = 1000;

static void ring_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    ring_st_t *s = st;
    const spawn_arg_t *a = arg;
    (void)c; (void)len;
    s->next = a->next;
    s->main = a->main;
    s->laps = a->laps;
    s->first = a->first;
}

static void on_setup(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)c; (void)src; (void)n;
    ((ring_st_t *)st)->next = *(const phx_tid_t *)m;
}

static void on_token(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    ring_st_t *s = st;
    token_t t = *(const token_t *)m;
    (void)src; (void)n;
    t.hops++;
    if (s->first && t.hops > 1 && ++t.lap == s->laps) {
        phx_send(c, s->main, T_DONE, &t, sizeof t);
        return;
    }
    phx_send(c, s->next, T_TOKEN, &t, sizeof t);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    main_st_t *s = st;
    (void)arg; (void)len;
    int n = phx_size(c);
    s->laps = ring_laps;   /* checked in main, on every node */
    /* Spawn backwards so each task is born knowing its successor; the
     * first closes the cycle with SETUP. */
    spawn_arg_t a = { .main = phx_self(c), .laps = s->laps, .first = 1 };
    phx_tid_t first = phx_spawn_on(c, ring_type, 0, &a, sizeof a);
    phx_tid_t next = first;
    a.first = 0;
    for (int r = n - 1; r >= 1; r--) {
        a.next = next;
        next = phx_spawn_on(c, ring_type, r, &a, sizeof a);
    }
    phx_send(c, first, T_SETUP, &next, sizeof next);
    token_t t = {0, 0};
    s->t0 = phx_now_ns();
    phx_send(c, first, T_TOKEN, &t, sizeof t);
}

static void on_done(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    main_st_t *s = st;
    const token_t *t = m;
    (void)src; (void)n;
    double ms = (double)(phx_now_ns() - s->t0) / 1e6;
    uint64_t hops = t->hops - 1;
    printf("ring: %d nodes x %" PRIu64 " laps = %" PRIu64 " hops in %.2f ms (%.2f us/hop) %s\n",
           phx_size(c), t->lap, hops, ms, ms * 1000.0 / (double)hops,
           hops == (uint64_t)phx_size(c) * t->lap ? "OK" : "WRONG");
    fflush(stdout);
    phx_exit(c, hops == (uint64_t)phx_size(c) * t->lap ? 0 : 1);
}

static const phx_args_t ARGS = { "ring", RING_USAGE, "  a token goes round all nodes LAPS times\n" };

int main(int argc, char **argv)
{
    int have = 0;
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    for (int i = 1; i < argc; i++) {
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (have++)
            return phx_args_bad(&ARGS, "unexpected argument '%s'", argv[i]);
        if (phx_args_u64(&ARGS, "LAPS", argv[i], 1, 1000000000000ull, &ring_laps))
            return 2;
    }
    phx_type_t rt = { .name = "ring", .state_size = sizeof(ring_st_t), .init = ring_init,
                      .handlers = { [T_SETUP] = on_setup, [T_TOKEN] = on_token } };
    phx_type_t mt = { .name = "main", .state_size = sizeof(main_st_t), .init = main_init,
                      .handlers = { [T_DONE] = on_done } };
    ring_type = phx_register_type(&rt);
    main_type = phx_register_type(&mt);
    return phx_main(argc, argv, main_type, NULL, 0);
}

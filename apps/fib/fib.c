/* fib: dynamic task creation across nodes. fib(n) spawns fib(n-1) and
 * fib(n-2) wherever placement puts them; results flow back to the parent.
 * The job ends by global quiescence (the termination detector), not by an
 * explicit exit, unless --exit is given.
 * Usage: fib [N] [--exit]   (N from 0 to 93, default 20) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "apps/common/phx_args.h"

enum { T_RESULT };

typedef struct fib_arg { phx_tid_t parent; int n; } fib_arg_t;
typedef struct fib_st { phx_tid_t parent; int pending; uint64_t sum; } fib_st_t;
typedef struct main_st { int n; uint64_t t0; } main_st_t;

#define FIB_USAGE "fib [N] [--exit]   (N from 0 to 93, default 20)"

static int fib_type, main_type, use_exit, fib_n = 20;

static uint64_t fib_seq(int n) { uint64_t a = 0, b = 1; while (n--) { uint64_t t = a + b; a = b; b = t; } return a; }

static void fib_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    fib_st_t *s = st;
    const fib_arg_t *a = arg;
    (void)len;
    s->parent = a->parent;
    if (a->n < 2) {
        uint64_t v = (uint64_t)a->n;
        phx_send(c, s->parent, T_RESULT, &v, sizeof v);
        phx_task_done(c);
        return;
    }
    s->pending = 2;
    fib_arg_t k = { phx_self(c), a->n - 1 };
    phx_spawn(c, fib_type, &k, sizeof k);
    k.n = a->n - 2;
    phx_spawn(c, fib_type, &k, sizeof k);
}

static void fib_result(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    fib_st_t *s = st;
    (void)src; (void)n;
    s->sum += *(const uint64_t *)m;
    if (--s->pending == 0) {
        phx_send(c, s->parent, T_RESULT, &s->sum, sizeof s->sum);
        phx_task_done(c);
    }
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    main_st_t *s = st;
    (void)arg; (void)len;
    s->n = fib_n;   /* checked in main, on every node */
    s->t0 = phx_now_ns();
    fib_arg_t k = { phx_self(c), s->n };
    phx_spawn(c, fib_type, &k, sizeof k);
}

static void main_result(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    main_st_t *s = st;
    uint64_t v = *(const uint64_t *)m;
    (void)src; (void)n;
    int ok = v == fib_seq(s->n);
    printf("fib(%d) = %" PRIu64 " on %d nodes in %.1f ms %s\n", s->n, v, phx_size(c),
           (double)(phx_now_ns() - s->t0) / 1e6, ok ? "OK" : "WRONG");
    fflush(stdout);
    phx_task_done(c);
    if (use_exit || !ok)
        phx_exit(c, ok ? 0 : 1);
}

static const phx_args_t ARGS = { "fib", FIB_USAGE,
                                 "  fib(N) by naive recursion, one task per call; --exit ends the job with\n"
                                 "  phx_exit instead of termination detection\n" };

int main(int argc, char **argv)
{
    int have_n = 0;
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    for (int i = 1; i < argc; i++) {
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (!strcmp(argv[i], "--exit"))
            use_exit = 1;
        else if (have_n++)
            return phx_args_bad(&ARGS, "unexpected argument '%s'", argv[i]);
        else if (phx_args_int(&ARGS, "N", argv[i], 0, 93, &fib_n))   /* fib(94) overflows 64 bits */
            return 2;
    }
    phx_type_t ft = { .name = "fib", .state_size = sizeof(fib_st_t), .init = fib_init,
                      .handlers = { [T_RESULT] = fib_result } };
    phx_type_t mt = { .name = "main", .state_size = sizeof(main_st_t), .init = main_init,
                      .handlers = { [T_RESULT] = main_result } };
    fib_type = phx_register_type(&ft);
    main_type = phx_register_type(&mt);
    return phx_main(argc, argv, main_type, NULL, 0);
}

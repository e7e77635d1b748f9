/* hello: every rank says hello to rank 0, which prints one line.
 *
 * Build against an installed Phalanx, any of three ways:
 *     phxcc hello.c -o hello
 *     cc $(pkg-config --cflags phalanx) hello.c -o hello $(pkg-config --libs phalanx)
 *     cmake -S . -B build && cmake --build build      (CMakeLists.txt here)
 * and run it on two nodes:
 *     phx run -n 2 ./hello
 *     hello: 2 of 2 ranks said hello */
#include <stdio.h>

#include <phalanx/phalanx.h>

enum { T_HELLO };   /* the one message tag main's handler table has */

typedef struct main_st { int heard; } main_st_t;

static int greeter_type, main_type;

/* Runs on rank r when main spawns a greeter there: sends r to main. */
static void greeter_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    phx_tid_t main_task = *(const phx_tid_t *)arg;
    int rank = phx_rank(c);
    (void)st; (void)len;
    phx_send(c, main_task, T_HELLO, &rank, sizeof rank);
    phx_task_done(c);
}

/* Rank 0 creates main: one greeter on every rank, its own id as their arg. */
static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    phx_tid_t self = phx_self(c);
    (void)st; (void)arg; (void)len;
    for (int r = 0; r < phx_size(c); r++)
        phx_spawn_on(c, greeter_type, r, &self, sizeof self);
}

static void on_hello(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    main_st_t *s = st;
    (void)src; (void)m; (void)n;
    if (++s->heard < phx_size(c))
        return;
    printf("hello: %d of %d ranks said hello\n", s->heard, phx_size(c));
    fflush(stdout);
    phx_exit(c, 0);   /* the job ends on every node */
}

int main(int argc, char **argv)
{
    phx_type_t gt = { .name = "greeter", .init = greeter_init };
    phx_type_t mt = { .name = "main", .state_size = sizeof(main_st_t), .init = main_init,
                      .handlers = { [T_HELLO] = on_hello } };
    greeter_type = phx_register_type(&gt);
    main_type = phx_register_type(&mt);
    if (greeter_type < 0 || main_type < 0) {
        fprintf(stderr, "hello: %s\n", phx_strerror(greeter_type < 0 ? greeter_type : main_type));
        return 1;
    }
    return phx_main(argc, argv, main_type, NULL, 0);
}

/* Unit tests for the core's building blocks: the hash map, message pools
 * (including cross-thread frees) and configuration precedence. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "core/config.h"
#include "core/held.h"
#include "core/map.h"
#include "core/msg.h"
#include "core/node.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* The map against a brute-force oracle under random insert/delete churn,
 * which exercises backward-shift deletion across wrapped probe runs. */
static void map_vs_oracle(void **state)
{
    (void)state;
    enum { KEYS = 512, OPS = 200000 };
    uint64_t oracle[KEYS] = {0};
    int present[KEYS] = {0};
    phx_map_t m;
    phx_map_init(&m);
    for (int i = 0; i < OPS; i++) {
        int k = (int)(next_rand() % KEYS);
        uint64_t key = (uint64_t)k * 0x10000 + 1;   /* clustered keys: long runs */
        switch (next_rand() % 3) {
        case 0: {
            uint64_t *v = phx_map_put(&m, key);
            assert_non_null(v);
            *v = oracle[k] = next_rand();
            present[k] = 1;
            break;
        }
        case 1:
            assert_int_equal(phx_map_del(&m, key), present[k]);
            present[k] = 0;
            break;
        default: {
            uint64_t *v = phx_map_get(&m, key);
            if (present[k]) {
                assert_non_null(v);
                assert_true(*v == oracle[k]);
            } else {
                assert_null(v);
            }
        }
        }
    }
    size_t n = 0;
    for (int k = 0; k < KEYS; k++)
        n += (size_t)present[k];
    assert_int_equal(m.len, n);
    phx_map_free(&m);
    printf("map: %d random operations checked against an oracle\n", OPS);
}

/* The held index against an oracle: copies of one <src, ssn> refused,
 * take finds exactly what is held, iteration sees every message once. */
static void held_vs_oracle(void **state)
{
    (void)state;
    enum { SRCS = 8, SSNS = 64, OPS = 100000 };
    static int present[SRCS][SSNS];
    phx_held_t h;
    phx_held_init(&h);
    for (int i = 0; i < OPS; i++) {
        int s = (int)(next_rand() % SRCS), q = (int)(next_rand() % SSNS);
        uint64_t src = 0x1000000000000ull + (uint64_t)s;   /* task ids differ in low bits */
        if (next_rand() % 2) {
            phx_msg_t *m = phx_msg_alloc(0);
            assert_non_null(m);
            m->hdr.src = src;
            m->hdr.ssn = (uint64_t)q + 1;
            int rc = phx_held_put(&h, m);
            assert_int_equal(rc, present[s][q] ? PHX_EEXIST : 0);
            if (rc)
                phx_msg_free(m);
            present[s][q] = 1;
        } else {
            phx_msg_t *m = phx_held_take(&h, src, (uint64_t)q + 1);
            assert_int_equal(m != NULL, present[s][q]);
            if (m) {
                assert_true(m->hdr.src == src && m->hdr.ssn == (uint64_t)q + 1);
                phx_msg_free(m);
            }
            present[s][q] = 0;
        }
    }
    uint32_t n = 0, seen = 0;
    for (int s = 0; s < SRCS; s++)
        for (int q = 0; q < SSNS; q++)
            n += (uint32_t)present[s][q];
    assert_int_equal(phx_held_len(&h), n);
    size_t it = 0;
    for (phx_msg_t *m; (m = phx_held_next(&h, &it));) {
        assert_true(present[m->hdr.src & 0xff][m->hdr.ssn - 1]);
        seen++;
    }
    assert_int_equal(seen, n);
    phx_held_free(&h);
    printf("held: %d random operations checked against an oracle, %u left held\n", OPS, n);
}

typedef struct xfer {
    phx_msg_t *msgs[4096];
    int n;
} xfer_t;

static void *free_all(void *arg)
{
    xfer_t *x = arg;
    phx_pool_t *p = phx_pool_create();   /* a different thread, a different pool */
    for (int i = 0; i < x->n; i++)
        phx_msg_free(x->msgs[i]);
    phx_pool_destroy(p);
    return NULL;
}

/* Messages freed on another thread return to their owner and are reused.
 * Sizes above the largest class (65536) bypass the pool: one per round
 * covers that path; drawing 1 MiB for a tenth of the messages made the
 * test 8 GiB of malloc traffic, over a minute under TSan (mmap shadow). */
/* Workers' shares of a node's tasks. phx_spawn_on round-robin over the
 * nodes gives node h the ids <h, creator, s0 + h + k * nodes>: every such
 * set of at least 4 tasks per worker must spread within 1.5 times the fair
 * share (the old mapping put all of them on one worker, so a replay of a
 * dead node's tasks ran on one core of two). Ids as core/node.c makes them. */
static void worker_spread(void **state)
{
    (void)state;
    static phx_node_t n;   /* only nworkers is read */
    int checked = 0;
    for (int nw = 2; nw <= 8; nw++) {
        n.nworkers = nw;
        for (int nodes = 1; nodes <= 32; nodes *= 2)
            for (int v = 4 * nw; v <= 32; v *= 2)
                for (uint64_t creator = 0; creator < 6; creator += 5)
                    for (uint64_t s0 = 0; s0 < 2; s0++)
                        for (int h = 0; h < nodes; h++) {
                            int load[8] = {0}, top = 0;
                            for (int k = 0; k < v; k++) {
                                phx_tid_t id = ((uint64_t)(h + 1) << 48) | creator << 32 | (s0 + (uint64_t)h + (uint64_t)k * (uint64_t)nodes);
                                int w = phx_worker_of(&n, id);
                                assert_true(w >= 0 && w < nw);
                                if (++load[w] > top)
                                    top = load[w];
                            }
                            /* top <= 1.5 * v / nw */
                            if (2 * top * nw > 3 * v)
                                fail_msg("%d tasks on %d workers (node %d of %d, creator %llu, s0 %llu): "
                                         "one worker got %d", v, nw, h, nodes, (unsigned long long)creator,
                                         (unsigned long long)s0, top);
                            checked++;
                        }
    }
    printf("worker spread: %d task sets within 1.5x the fair share\n", checked);
}

static void pool_cross_thread(void **state)
{
    (void)state;
    phx_pool_t *p = phx_pool_create();
    xfer_t *x = calloc(1, sizeof *x);
    size_t sizes[] = { 0, 8, 64, 65, 512, 4000, 8192, 60000, 65536, 65537 };
    for (int round = 0; round < 20; round++) {
        x->n = 0;
        for (int i = 0; i < 4096; i++) {
            size_t len = i == 0 ? (size_t)1 << 20 : sizes[next_rand() % 10];
            phx_msg_t *m = phx_msg_alloc(len);
            assert_non_null(m);
            assert_true(m->cap >= len);
            assert_int_equal(m->hdr.len, len);
            memset(m->data, 0xab, len);
            x->msgs[x->n++] = m;
        }
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, free_all, x), 0);
        pthread_join(th, NULL);
    }
    /* After the remote frees, small allocations come from the returned stock. */
    phx_msg_t *m = phx_msg_alloc(8);
    assert_non_null(m);
    phx_msg_free(m);
    phx_pool_destroy(p);
    free(x);
    printf("pool: 20 rounds x 4096 cross-thread frees\n");
}

static void config_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/phx-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "# comment\nworkers = 3\nhb-timeout = 500  # trailing\nsend-buffer = 1m\ntd = edod\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    unsetenv("PHX_RANK");
    unsetenv("PHX_SIZE");
    unsetenv("PHX_PEERS");
    setenv("PHX_HB_TIMEOUT", "700", 1);      /* env beats file */
    char cfgflag[64];
    snprintf(cfgflag, sizeof cfgflag, "--phx-config=%s", path);
    char *argv[] = { "prog", "--phx-td=cda", "appArg", cfgflag, "--phx-busy-poll", NULL };
    int argc = 5;
    phx_config_t c;
    assert_int_equal(phx_config_load(&c, &argc, argv), 0);
    assert_int_equal(argc, 2);                /* runtime flags are removed */
    assert_string_equal(argv[1], "appArg");
    assert_string_equal(c.td, "cda");         /* flag beats file */
    assert_int_equal(c.hb_timeout_ms, 700);
    assert_int_equal(c.hb_period_ms, 70);     /* eta = delta / 10 */
    assert_int_equal(c.workers, 3);
    assert_int_equal(c.busy_poll, 1);
    assert_true(c.send_buffer == 1 << 20);
    assert_int_equal(c.size, 1);
    phx_config_free(&c);

    char *bad[] = { "prog", "--phx-workers=lots", NULL };
    argc = 2;
    assert_int_equal(phx_config_load(&c, &argc, bad), -EINVAL);
    char *unknown[] = { "prog", "--phx-nonsense=1", NULL };
    argc = 2;
    assert_int_equal(phx_config_load(&c, &argc, unknown), -EINVAL);

    setenv("PHX_RANK", "1", 1);
    setenv("PHX_SIZE", "2", 1);
    setenv("PHX_PEERS", "10.0.0.1:7000,node-b:7001", 1);
    char *plain[] = { "prog", NULL };
    argc = 1;
    assert_int_equal(phx_config_load(&c, &argc, plain), 0);
    assert_string_equal(c.peers[1].host, "node-b");
    assert_int_equal(c.peers[0].port, 7000);
    phx_config_free(&c);
    setenv("PHX_PEERS", "10.0.0.1:7000", 1);   /* fewer peers than PHX_SIZE */
    argc = 1;
    assert_int_equal(phx_config_load(&c, &argc, plain), -EINVAL);
    phx_config_free(&c);
    unsetenv("PHX_RANK");
    unsetenv("PHX_SIZE");
    unsetenv("PHX_PEERS");
    unsetenv("PHX_HB_TIMEOUT");
    unlink(path);
}

/* The launcher's check: the same table, both flag spellings, ranges,
 * choices, and the settings that cannot take effect refused. */
static void config_check(void **state)
{
    (void)state;
    phx_config_t c;
    assert_int_equal(phx_config_flag_arity("--phx-log", "info"), 2);
    assert_int_equal(phx_config_flag_arity("--phx-log=info", "x"), 1);
    assert_int_equal(phx_config_flag_arity("--phx-ft", "1"), 2);
    assert_int_equal(phx_config_flag_arity("--phx-ft", "prog"), 1);
    assert_int_equal(phx_config_flag_arity("--phx-ft", NULL), 1);
    assert_int_equal(phx_config_flag_arity("--phx-log", "--phx-ft"), 1);
    assert_int_equal(phx_config_flag_arity("--phx-config", "f"), 2);
    assert_int_equal(phx_config_flag_arity("--phx-nonsense", "v"), 1);
    assert_int_equal(phx_config_flag_arity("prog", "v"), 1);
    assert_int_equal(phx_config_max_workers(2), 64);
    assert_int_equal(phx_config_max_workers(16), 128);

    char *ok[] = { "prog", "--phx-ft", "on", "arg", "--phx-recovery", "cr", "--phx-ckpt-interval=5", NULL };
    assert_int_equal(phx_config_check(7, ok, 2, 4, &c), 0);
    assert_int_equal(c.ft, 1);
    assert_string_equal(c.recovery, "cr");
    assert_int_equal(c.ckpt_interval, 5);
    assert_string_equal(ok[3], "arg");   /* argv is left as it is */

    char *bad[][3] = {
        { "prog", "--phx-recovry=cr", NULL },            /* unknown key */
        { "prog", "--phx-recovery=mlog-causl", NULL },   /* not a choice */
        { "prog", "--phx-td=bogus", NULL },
        { "prog", "--phx-metrics-port=70000", NULL },    /* out of range */
        { "prog", "--phx-hb-timeout=0", NULL },
        { "prog", "--phx-workers=65", NULL },            /* above 64 on 2 CPUs */
        { "prog", "--phx-ckpt-interval=5", NULL },       /* no checkpointing mode */
        { "prog", "--phx-ckpt-dir=/tmp", NULL },
        { "prog", "--phx-restart=/tmp", NULL },
        { "prog", "--phx-recovery=cr", NULL },           /* recovery without ft */
        { "prog", "--phx-metrics-port=65533", NULL },    /* rank 3 would be at 65536 */
        { "prog", "--phx-log", NULL },                   /* no value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (phx_config_check(2, bad[i], 2, 4, &c) != PHX_EINVAL)
            fail_msg("%s accepted", bad[i][1]);
    char *help[] = { "prog", "--phx-help", NULL };
    assert_int_equal(phx_config_check(2, help, 2, 4, &c), 0);   /* left to the nodes */
    char *w[] = { "prog", "--phx-workers=65", NULL };
    assert_int_equal(phx_config_check(2, w, 0, 4, &c), 0);      /* cpus unknown: no bound */
    setenv("PHX_CKPT_DIR", "/tmp", 1);
    char *plain[] = { "prog", NULL };
    assert_int_equal(phx_config_check(1, plain, 2, 4, &c), PHX_EINVAL);   /* from the environment */
    unsetenv("PHX_CKPT_DIR");
    assert_int_equal(phx_config_check(1, plain, 2, 4, &c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(map_vs_oracle),
        cmocka_unit_test(held_vs_oracle),
        cmocka_unit_test(worker_spread),
        cmocka_unit_test(pool_cross_thread),
        cmocka_unit_test(config_precedence),
        cmocka_unit_test(config_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

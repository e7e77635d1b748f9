/* Hypercube reliable broadcast (ft/hb/bcast.c) against the claim of seed
 * 002_*: with n members in the origin's view and k = floor(log2 n), every
 * live member receives the message whenever f <= k - 1 members fail, the
 * failures being unknown to the origin (it still routes through them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/hb/bcast.h"

#define MAXN 256

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

struct sim_result {
    int copies[MAXN];      /* copies received, all cubes and trees */
    int max_hops;
    int msgs;
};

/* Delivers every copy along the topology; a failed rank absorbs what it
 * gets and forwards nothing. Returns 0 or a negative code from bcast. */
static int simulate(const phx_ft_bcast_t *b, int nranks, int origin, const uint8_t *failed,
                    struct sim_result *res)
{
    static struct { int dst, cube, tree, hops; } q[MAXN * 64];
    phx_ft_bcast_hop_t hops[64];
    memset(res, 0, sizeof(*res));
    int head = 0, tail = 0;
    int nh = phx_ft_bcast_start(b, hops, 64);
    assert_true(nh >= 0 && nh <= 64);
    for (int i = 0; i < nh; i++)
        q[tail++] = (typeof(q[0])){ hops[i].dst, hops[i].cube, hops[i].tree, 1 };
    while (head < tail) {
        typeof(q[0]) m = q[head++];
        res->msgs++;
        assert_true(m.dst >= 0 && m.dst < nranks && m.dst != origin);
        res->copies[m.dst]++;
        if (m.hops > res->max_hops)
            res->max_hops = m.hops;
        if (failed && failed[m.dst])
            continue;
        int fh = phx_ft_bcast_forward(b, m.dst, (unsigned)m.cube, (unsigned)m.tree, hops, 64);
        if (fh < 0)
            return fh;
        for (int i = 0; i < fh; i++) {
            assert_true(tail < (int)(sizeof(q) / sizeof(q[0])));
            q[tail++] = (typeof(q[0])){ hops[i].dst, hops[i].cube, hops[i].tree, m.hops + 1 };
        }
    }
    return 0;
}

/* Seed table, n = 8, source 0: the path to each node inside tree j (the tree
 * entered through node 1<<j). */
static void test_seed_table(void **state)
{
    (void)state;
    static const char *table[8][3] = {
        { NULL, NULL, NULL },
        { "0", "0-2-3", "0-4-5" },
        { "0-1-3", "0", "0-4-6" },
        { "0-1", "0-2", "0-4-5-7" },
        { "0-1-5", "0-2-6", "0" },
        { "0-1", "0-2-6-7", "0-4" },
        { "0-1-3-7", "0-2", "0-4" },
        { "0-1-3", "0-2-6", "0-4-5" },
    };
    phx_ft_bcast_t *b;
    assert_int_equal(phx_ft_bcast_create(8, 0, NULL, 0, &b), 0);
    assert_int_equal(phx_ft_bcast_ncubes(b), 1);
    assert_int_equal(phx_ft_bcast_dim(b), 3);
    int checked = 0;
    for (int j = 0; j < 3; j++) {
        int parent[8];
        for (int i = 0; i < 8; i++)
            parent[i] = -2;
        parent[1 << j] = 0;
        /* Walk tree j breadth first to get parents. */
        int q[8], h = 0, t = 0;
        q[t++] = 1 << j;
        while (h < t) {
            int v = q[h++];
            phx_ft_bcast_hop_t hops[8];
            int nh = phx_ft_bcast_forward(b, v, 0, (unsigned)j, hops, 8);
            assert_true(nh >= 0);
            for (int i = 0; i < nh; i++) {
                assert_int_equal(hops[i].tree, j);
                assert_int_equal(parent[hops[i].dst], -2);   /* a tree */
                parent[hops[i].dst] = v;
                q[t++] = hops[i].dst;
            }
        }
        assert_int_equal(t, 7);
        for (int v = 1; v < 8; v++) {
            /* Path to v, excluding v itself, as in the seed's table. */
            int path[8], len = 0;
            for (int u = parent[v]; u != 0; u = parent[u])
                path[len++] = u;
            char s[32] = "0";
            for (int i = len - 1; i >= 0; i--) {
                char e[4];
                snprintf(e, sizeof e, "-%d", path[i]);
                strcat(s, e);
            }
            assert_string_equal(s, table[v][j]);
            checked++;
        }
    }
    phx_ft_bcast_destroy(b);
    printf("bcast: seed table n=8: %d paths match\n", checked);
}

/* Fault-free: each member gets exactly one copy per tree of each cube that
 * contains it, every cube member is covered, within max_hops. */
static void test_fault_free_structure(void **state)
{
    (void)state;
    int cases = 0;
    for (int nranks = 1; nranks <= 70; nranks++) {
        for (int origin = 0; origin < nranks; origin++) {
            phx_ft_bcast_t *b;
            assert_int_equal(phx_ft_bcast_create(nranks, origin, NULL, 0, &b), 0);
            struct sim_result r;
            assert_int_equal(simulate(b, nranks, origin, NULL, &r), 0);
            int k = phx_ft_bcast_dim(b), nc = phx_ft_bcast_ncubes(b);
            int total = 0;
            for (int v = 0; v < nranks; v++) {
                if (v == origin) {
                    assert_int_equal(r.copies[v], 0);
                    continue;
                }
                /* members in both cubes get 2k copies, the others k */
                assert_true(r.copies[v] == k || (nc == 2 && r.copies[v] == 2 * k));
                total += r.copies[v];
            }
            assert_int_equal(total, r.msgs);
            assert_int_equal(nc * k * ((1 << k) - 1), r.msgs);
            assert_true(r.max_hops <= phx_ft_bcast_max_hops(b));
            phx_ft_bcast_destroy(b);
            cases++;
        }
    }
    printf("bcast: fault-free structure checked for %d (nranks, origin) pairs\n", cases);
}

/* Enumerates failure sets of size <= fmax over members other than origin
 * (in increasing rank order) and checks full delivery. Returns the number
 * of sets checked; *broken counts sets that left a live member uncovered. */
static long check_all_sets(int nranks, int origin, const int *dead, size_t ndead, int fmax,
                           int exact_f, long *broken)
{
    phx_ft_bcast_t *b;
    assert_int_equal(phx_ft_bcast_create(nranks, origin, dead, ndead, &b), 0);
    int cand[MAXN], nc = 0;
    uint8_t isdead[MAXN] = { 0 };
    for (size_t i = 0; i < ndead; i++)
        isdead[dead[i]] = 1;
    for (int r = 0; r < nranks; r++)
        if (r != origin && !isdead[r])
            cand[nc++] = r;
    assert_int_equal(nc + 1, phx_ft_bcast_members(b));
    long count = 0;
    int idx[16];
    for (int f = exact_f ? fmax : 0; f <= fmax && f <= nc; f++) {
        for (int i = 0; i < f; i++)
            idx[i] = i;
        for (;;) {
            uint8_t failed[MAXN] = { 0 };
            for (int i = 0; i < f; i++)
                failed[cand[idx[i]]] = 1;
            struct sim_result r;
            assert_int_equal(simulate(b, nranks, origin, failed, &r), 0);
            int ok = 1;
            for (int i = 0; i < nc; i++)
                if (!failed[cand[i]] && r.copies[cand[i]] == 0)
                    ok = 0;
            if (!ok)
                (*broken)++;
            assert_true(r.max_hops <= phx_ft_bcast_max_hops(b));
            count++;
            int i = f - 1;
            while (i >= 0 && idx[i] == nc - f + i)
                i--;
            if (i < 0)
                break;
            idx[i]++;
            for (int j = i + 1; j < f; j++)
                idx[j] = idx[j - 1] + 1;
        }
    }
    phx_ft_bcast_destroy(b);
    return count;
}

static int floor_log2(int n)
{
    int k = 0;
    while ((2 << k) <= n)
        k++;
    return k;
}

static void exhaustive_n(int n)
{
    long sets = 0, broken = 0;
    int k = floor_log2(n);
    for (int origin = 0; origin < n; origin++)
        sets += check_all_sets(n, origin, NULL, 0, k - 1, 0, &broken);
    assert_int_equal(broken, 0);
    printf("bcast: n=%d exhaustive: %ld (origin, failure set) cases with f<=%d, all delivered\n",
           n, sets, k - 1);
}

static void test_exhaustive_8(void **state) { (void)state; exhaustive_n(8); }
static void test_exhaustive_13(void **state) { (void)state; exhaustive_n(13); }

/* Every n from 2 to 24, and members given by a dead set the origin already
 * knows (the topology is over the origin's live view). */
static void test_exhaustive_small_and_known_dead(void **state)
{
    (void)state;
    long sets = 0, broken = 0;
    for (int n = 2; n <= 24; n++) {
        int k = floor_log2(n);
        for (int origin = 0; origin < n; origin++)
            sets += check_all_sets(n, origin, NULL, 0, k - 1, 0, &broken);
    }
    assert_int_equal(broken, 0);
    rng_state = 0x9e3779b97f4a7c15ull;
    long ksets = 0, views = 0;
    for (int iter = 0; iter < 60; iter++) {
        int nranks = 10 + (int)(rnd() % 14);          /* 10..23 */
        int nd = (int)(rnd() % (uint64_t)(nranks - 2)); /* at least 2 members */
        int origin = (int)(rnd() % (uint64_t)nranks);
        int dead[MAXN], m = 0;
        uint8_t used[MAXN] = { 0 };
        used[origin] = 1;
        while (m < nd) {
            int r = (int)(rnd() % (uint64_t)nranks);
            if (!used[r]) {
                used[r] = 1;
                dead[m++] = r;
            }
        }
        int k = floor_log2(nranks - nd);
        ksets += check_all_sets(nranks, origin, dead, (size_t)nd, k - 1, 0, &broken);
        views++;
    }
    assert_int_equal(broken, 0);
    printf("bcast: n=2..24 exhaustive: %ld cases; known-dead views: %ld views, %ld cases; "
           "all delivered\n", sets, views, ksets);
}

/* The bound is tight: with f = k some failure set cuts a live member off
 * (for instance all k cube neighbours of a member), so the checker can fail. */
static void test_bound_is_tight(void **state)
{
    (void)state;
    const int ns[] = { 8, 13 };
    for (size_t i = 0; i < 2; i++) {
        int n = ns[i], k = floor_log2(n);
        long sets = 0, broken = 0;
        for (int origin = 0; origin < n; origin++)
            sets += check_all_sets(n, origin, NULL, 0, k, 1, &broken);
        assert_true(broken > 0);
        printf("bcast: n=%d f=%d (beyond the bound): %ld of %ld sets lose a member\n",
               n, k, broken, sets);
    }
}

static void random_n(int n, int samples)
{
    rng_state = 0x1234567ull * (uint64_t)n + 1;
    int k = floor_log2(n);
    long broken = 0;
    for (int s = 0; s < samples; s++) {
        /* Half the samples run on a bigger group with some ranks already
         * known dead, so that the origin's view has exactly n members. */
        int extra = (s & 1) ? (int)(rnd() % 8) : 0;
        int nranks = n + extra;
        int origin = (int)(rnd() % (uint64_t)nranks);
        uint8_t used[MAXN] = { 0 }, failed[MAXN] = { 0 };
        int dead[MAXN], nd = 0;
        used[origin] = 1;
        while (nd < extra) {
            int r = (int)(rnd() % (uint64_t)nranks);
            if (!used[r]) {
                used[r] = 1;
                dead[nd++] = r;
            }
        }
        int f = (int)(rnd() % (uint64_t)k);   /* 0..k-1 */
        for (int i = 0; i < f;) {
            int r = (int)(rnd() % (uint64_t)nranks);
            if (!used[r]) {
                used[r] = 1;
                failed[r] = 1;
                i++;
            }
        }
        phx_ft_bcast_t *b;
        assert_int_equal(phx_ft_bcast_create(nranks, origin, dead, (size_t)nd, &b), 0);
        assert_int_equal(phx_ft_bcast_members(b), n);
        struct sim_result r;
        assert_int_equal(simulate(b, nranks, origin, failed, &r), 0);
        for (int v = 0; v < nranks; v++)
            if (!used[v] && r.copies[v] == 0)
                broken++;
        assert_true(r.max_hops <= k + 1);
        phx_ft_bcast_destroy(b);
    }
    assert_int_equal(broken, 0);
    printf("bcast: n=%d random: %d samples with f<=%d, all delivered\n", n, samples, k - 1);
}

static void test_random_16_32_64(void **state)
{
    (void)state;
    random_n(16, 20000);
    random_n(32, 20000);
    random_n(64, 10000);
}

static void test_bad_args(void **state)
{
    (void)state;
    phx_ft_bcast_t *b;
    int d[2] = { 3, 5 };
    assert_int_equal(phx_ft_bcast_create(0, 0, NULL, 0, &b), PHX_EINVAL);
    assert_int_equal(phx_ft_bcast_create(8, 8, NULL, 0, &b), PHX_EINVAL);
    assert_int_equal(phx_ft_bcast_create(8, 3, d, 2, &b), PHX_EINVAL);   /* origin dead */
    assert_int_equal(phx_ft_bcast_create(8, 0, d, 2, &b), 0);
    assert_int_equal(phx_ft_bcast_members(b), 6);
    phx_ft_bcast_hop_t h[8];
    assert_int_equal(phx_ft_bcast_forward(b, 0, 0, 0, h, 8), PHX_EINVAL);   /* origin */
    assert_int_equal(phx_ft_bcast_forward(b, 3, 0, 0, h, 8), PHX_EINVAL);   /* dead */
    assert_int_equal(phx_ft_bcast_forward(b, 1, 2, 0, h, 8), PHX_EINVAL);   /* cube */
    assert_int_equal(phx_ft_bcast_forward(b, 1, 0, 7, h, 8), PHX_EINVAL);   /* tree */
    phx_ft_bcast_destroy(b);
    assert_int_equal(phx_ft_bcast_create(1, 0, NULL, 0, &b), 0);
    assert_int_equal(phx_ft_bcast_start(b, h, 8), 0);
    phx_ft_bcast_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_table),
        cmocka_unit_test(test_fault_free_structure),
        cmocka_unit_test(test_exhaustive_8),
        cmocka_unit_test(test_exhaustive_13),
        cmocka_unit_test(test_exhaustive_small_and_known_dead),
        cmocka_unit_test(test_bound_is_tight),
        cmocka_unit_test(test_random_16_32_64),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

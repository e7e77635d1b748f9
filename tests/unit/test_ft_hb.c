/* Ring heartbeat failure detector (ft/hb/hb.c), ring order
 * (ft/hb/ring.c) and their wire format, without sockets: single-instance
 * tests of T1-T5 and FindEmitter, then a deterministic discrete-event
 * simulator (virtual time, FIFO links with seeded random delay <= tau). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "ft/hb/bcast.h"
#include "ft/hb/hb.h"
#include "ft/hb/ring.h"

#define MAXN   64
#define MS     1000000ull
#define DELTA  (100 * MS)

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
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static int floor_log2(int n)
{
    int k = 0;
    while ((2 << k) <= n)
        k++;
    return k;
}

/* ------------------------------------------------------------------------ */
/* Test-side encoder, written from the format in hb.c's header comment and  */
/* README.md (not from the library), so format drift is caught.             */

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static size_t enc_hdr(uint8_t *p, unsigned type, int sender, uint32_t inc, int n)
{
    p[0] = 1;
    p[1] = (uint8_t)type;
    p[2] = p[3] = 0;
    le32(p + 4, (uint32_t)sender);
    le32(p + 8, inc);
    le32(p + 12, (uint32_t)n);
    return 16;
}

/* Digest of D (README): XOR over r in D of splitmix64's finaliser of r. */
static uint64_t digest_of(const int *D, int nd)
{
    uint64_t h = 0;
    for (int i = 0; i < nd; i++) {
        uint64_t x = (uint64_t)D[i] + 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        h ^= x ^ (x >> 31);
    }
    return h;
}

static size_t enc_beat(uint8_t *p, int sender, uint32_t inc, int n, const int *D, int nd)
{
    enc_hdr(p, PHX_FT_HB_HEARTBEAT, sender, inc, n);
    le32(p + 16, (uint32_t)nd);
    uint64_t h = digest_of(D, nd);
    le32(p + 20, (uint32_t)h);
    le32(p + 24, (uint32_t)(h >> 32));
    return 28;
}

static size_t enc_dset(uint8_t *p, int sender, int n, unsigned flags, const int *D, int nd)
{
    enc_hdr(p, PHX_FT_HB_DSET, sender, 0, n);
    p[16] = (uint8_t)flags;
    p[17] = p[18] = p[19] = 0;
    le32(p + 20, (uint32_t)nd);
    for (int i = 0; i < nd; i++)
        le32(p + 24 + 4 * i, (uint32_t)D[i]);
    return 24 + 4 * (size_t)nd;
}

static size_t enc_bcast(uint8_t *p, int sender, int n, int origin, uint32_t seq, int dead,
                        int cube, int tree, const int *D, int nd)
{
    enc_hdr(p, PHX_FT_HB_BCASTMSG, sender, 0, n);
    le32(p + 16, (uint32_t)origin);
    le32(p + 20, seq);
    le32(p + 24, (uint32_t)dead);
    p[28] = (uint8_t)cube;
    p[29] = (uint8_t)tree;
    p[30] = p[31] = 0;
    le32(p + 32, (uint32_t)nd);
    for (int i = 0; i < nd; i++)
        le32(p + 36 + 4 * i, (uint32_t)D[i]);
    return 36 + 4 * (size_t)nd;
}

/* ------------------------------------------------------------------------ */
/* Single instance with captured outputs.                                   */

struct sent {
    int dst;
    unsigned type;
    size_t len;
    uint8_t buf[512];
};

struct cap {
    struct sent s[256];
    int ns;
    int dead_calls[MAXN];
    int dead_order[MAXN], ndead_order;
    int fenced;
};

static void cap_send(void *ctx, int dst, unsigned type, const void *buf, size_t len)
{
    struct cap *c = ctx;
    assert_true(c->ns < 256 && len <= 512);
    assert_int_not_equal(phx_ft_hb_frame_type(type), 0);
    c->s[c->ns].dst = dst;
    c->s[c->ns].type = type;
    c->s[c->ns].len = len;
    memcpy(c->s[c->ns].buf, buf, len);
    c->ns++;
}

static void cap_dead(void *ctx, int rank, uint64_t now)
{
    (void)now;
    struct cap *c = ctx;
    c->dead_calls[rank]++;
    c->dead_order[c->ndead_order++] = rank;
}

static void cap_fenced(void *ctx)
{
    struct cap *c = ctx;
    c->fenced++;
}

static phx_ft_hb_t *mk(int n, int rank, const int *ring, struct cap *c, uint32_t inc)
{
    memset(c, 0, sizeof(*c));
    phx_ft_hb_cfg_t cfg = { .nranks = n, .rank = rank, .incarnation = inc, .ring = ring,
                            .delta_ns = DELTA };
    phx_ft_hb_env_t env = { .ctx = c, .send = cap_send, .on_dead = cap_dead,
                            .on_fenced = cap_fenced };
    phx_ft_hb_t *hb;
    assert_int_equal(phx_ft_hb_create(&cfg, &env, &hb), 0);
    return hb;
}

static phx_ft_hb_t *mk_started(int n, int rank, struct cap *c)
{
    phx_ft_hb_t *hb = mk(n, rank, NULL, c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    return hb;
}

static int count_type(const struct cap *c, unsigned type, int dst)
{
    int k = 0;
    for (int i = 0; i < c->ns; i++)
        k += c->s[i].type == type && (dst < 0 || c->s[i].dst == dst);
    return k;
}

static void feed_simple(phx_ft_hb_t *hb, int src, unsigned type, int n, uint64_t now, int want)
{
    uint8_t b[32];
    size_t len = type == PHX_FT_HB_HEARTBEAT ? enc_beat(b, src, 0, n, NULL, 0)
                                             : enc_hdr(b, type, src, 0, n);
    assert_int_equal(phx_ft_hb_on_msg(hb, src, type, b, len, now), want);
}

/* Ticks at every deadline up to `until`, as the runtime's timer does: calls
 * further apart than the stall slack would read as a stall. */
static void run_to(phx_ft_hb_t *hb, uint64_t until)
{
    uint64_t d;
    while ((d = phx_ft_hb_next_deadline(hb)) <= until)
        assert_int_equal(phx_ft_hb_tick(hb, d), 0);
}

/* T1: a heartbeat to the observer at start and every eta after. */
static void test_t1_heartbeat_period(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk(5, 2, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_next_deadline(hb), UINT64_MAX);   /* not started */
    assert_int_equal(phx_ft_hb_emitter(hb), 1);
    assert_int_equal(phx_ft_hb_observer(hb), 3);
    uint64_t t0 = 1000;
    assert_int_equal(phx_ft_hb_start(hb, t0), 0);
    int beats = 0;
    /* Keep the emitter alive so that only T1 fires. */
    for (uint64_t t = t0; t < t0 + DELTA; t = phx_ft_hb_next_deadline(hb)) {
        feed_simple(hb, 1, PHX_FT_HB_HEARTBEAT, 5, t, 0);
        assert_int_equal(phx_ft_hb_tick(hb, t), 0);
        beats++;
        assert_int_equal(count_type(&c, PHX_FT_HB_HEARTBEAT, 3), beats);
        assert_int_equal(c.ns, beats);
    }
    assert_int_equal(beats, 10);   /* eta = delta / 10 */
    phx_ft_hb_destroy(hb);
    printf("hb: T1 %d heartbeats in one delta\n", beats);
}

/* T2 re-arms delta only for the current emitter; T3 then fires. */
static void test_t2_t3_suspicion(void **state)
{
    (void)state;
    struct cap c;
    int n = 8;
    phx_ft_hb_t *hb = mk(n, 0, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    uint64_t t = 2 * DELTA - 1;   /* start grace is 2 delta */
    for (; t < 20 * DELTA; t += DELTA / 2) {
        feed_simple(hb, 7, PHX_FT_HB_HEARTBEAT, n, t, 0);   /* emitter */
        feed_simple(hb, 3, PHX_FT_HB_HEARTBEAT, n, t, 0);   /* stray: no effect */
        assert_int_equal(phx_ft_hb_tick(hb, t), 0);
        run_to(hb, t + DELTA / 2 - 1);
    }
    assert_int_equal(phx_ft_hb_dead_count(hb), 0);
    uint64_t last = t - DELTA / 2;
    /* Keep only the stray beating: the deadline stays last + delta. */
    run_to(hb, last + DELTA - 2);
    feed_simple(hb, 3, PHX_FT_HB_HEARTBEAT, n, last + DELTA - 1, 0);
    assert_true(phx_ft_hb_next_deadline(hb) <= last + DELTA);
    c.ns = 0;
    uint64_t now = last + DELTA + 1;   /* T3 declares on the confirmation tick */
    while (phx_ft_hb_next_deadline(hb) <= now)
        assert_int_equal(phx_ft_hb_tick(hb, phx_ft_hb_next_deadline(hb)), 0);
    /* T3: 7 dead, new emitter 6 gets NEWOBSERVER, broadcast per topology. */
    assert_int_equal(phx_ft_hb_dead_count(hb), 1);
    assert_true(phx_ft_hb_is_dead(hb, 7));
    assert_int_equal(c.dead_calls[7], 1);
    assert_int_equal(phx_ft_hb_emitter(hb), 6);
    assert_int_equal(count_type(&c, PHX_FT_HB_NEWOBSERVER, 6), 1);
    int dl[1] = { 7 };
    phx_ft_bcast_t *b;
    assert_int_equal(phx_ft_bcast_create(n, 0, dl, 1, &b), 0);
    phx_ft_bcast_hop_t hops[16];
    int nh = phx_ft_bcast_start(b, hops, 16);
    assert_int_equal(count_type(&c, PHX_FT_HB_BCASTMSG, -1), nh);
    for (int i = 0; i < nh; i++)
        assert_true(count_type(&c, PHX_FT_HB_BCASTMSG, hops[i].dst) >= 1);
    phx_ft_bcast_destroy(b);
    /* New emitter 6 gets 2 delta before the next T3, then it is declared. */
    uint64_t nd = phx_ft_hb_next_deadline(hb);
    while (nd < now + 2 * DELTA) {
        assert_int_equal(phx_ft_hb_tick(hb, nd), 0);
        nd = phx_ft_hb_next_deadline(hb);
    }
    assert_int_equal(phx_ft_hb_dead_count(hb), 1);
    run_to(hb, now + 2 * DELTA + 1);
    assert_int_equal(phx_ft_hb_dead_count(hb), 2);
    assert_true(phx_ft_hb_is_dead(hb, 6));
    assert_int_equal(phx_ft_hb_emitter(hb), 5);
    phx_ft_hb_destroy(hb);
}

/* T4: NEWOBSERVER switches the observer and sends a heartbeat at once. */
static void test_t4_newobserver(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk(6, 1, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    assert_int_equal(phx_ft_hb_tick(hb, 0), 0);
    c.ns = 0;
    feed_simple(hb, 4, PHX_FT_HB_NEWOBSERVER, 6, 10, 0);
    assert_int_equal(phx_ft_hb_observer(hb), 4);
    assert_int_equal(c.ns, 1);
    assert_int_equal(c.s[0].dst, 4);
    assert_int_equal(c.s[0].type, PHX_FT_HB_HEARTBEAT);
    assert_int_equal(phx_ft_hb_next_deadline(hb), 10 + DELTA / 10);
    phx_ft_hb_destroy(hb);
}

/* T5 + FindEmitter, exhaustively for n = 8 over every dead set, origin and
 * two ring orders: D merged, on_dead once per new rank, emitter/observer
 * are the nearest live ring neighbours, NEWOBSERVER only to a new emitter,
 * forwarding exactly per the bcast topology, duplicates suppressed. */
static void test_t5_findemitter_exhaustive(void **state)
{
    (void)state;
    const int n = 8;
    int rings[2][8] = { { 0, 1, 2, 3, 4, 5, 6, 7 }, { 0, 5, 2, 7, 4, 1, 6, 3 } };
    long cases = 0;
    for (int ri = 0; ri < 2; ri++) {
        int pos[8];
        assert_int_equal(phx_ft_ring_invert(n, rings[ri], pos), 0);
        for (int origin = 1; origin < n; origin++) {
            for (unsigned mask = 1; mask < 256; mask++) {
                if (mask & 1u || mask & (1u << origin))
                    continue;   /* me = 0 and the origin alive */
                int D[8], nd = 0;
                for (int r = 0; r < n; r++)
                    if (mask & (1u << r))
                        D[nd++] = r;
                phx_ft_bcast_t *b;
                assert_int_equal(phx_ft_bcast_create(n, origin, D, (size_t)nd, &b), 0);
                /* Find a copy that rank 0 relays. */
                int cube = -1, tree = 0;
                for (int cu = 0; cu < phx_ft_bcast_ncubes(b) && cube < 0; cu++)
                    if (phx_ft_bcast_forward(b, 0, (unsigned)cu, 0, NULL, 0) >= 0)
                        cube = cu;
                if (cube < 0) {
                    phx_ft_bcast_destroy(b);
                    continue;
                }
                struct cap c;
                phx_ft_hb_t *hb = mk(n, 0, rings[ri], &c, 0);
                assert_int_equal(phx_ft_hb_start(hb, 0), 0);
                int em0 = phx_ft_hb_emitter(hb);
                uint8_t msg[128];
                size_t len = enc_bcast(msg, origin, n, origin, 9, D[0], cube, tree, D, nd);
                assert_int_equal(phx_ft_hb_on_msg(hb, origin, PHX_FT_HB_BCASTMSG, msg, len, 5), 0);
                /* reference FindEmitter / observer walk */
                int p = pos[0], em = 0, ob = 0;
                for (int i = 1; i < n; i++)
                    if (!(mask & (1u << rings[ri][(p - i + n) % n]))) {
                        em = rings[ri][(p - i + n) % n];
                        break;
                    }
                for (int i = 1; i < n; i++)
                    if (!(mask & (1u << rings[ri][(p + i) % n]))) {
                        ob = rings[ri][(p + i) % n];
                        break;
                    }
                assert_int_equal(phx_ft_hb_emitter(hb), em);
                assert_int_equal(phx_ft_hb_observer(hb), ob);
                assert_int_equal(phx_ft_hb_dead_count(hb), nd);
                for (int r = 0; r < n; r++) {
                    assert_int_equal(phx_ft_hb_is_dead(hb, r), !!(mask & (1u << r)));
                    assert_int_equal(c.dead_calls[r], !!(mask & (1u << r)));
                }
                assert_int_equal(count_type(&c, PHX_FT_HB_NEWOBSERVER, -1), em != em0);
                if (em != em0)
                    assert_int_equal(count_type(&c, PHX_FT_HB_NEWOBSERVER, em), 1);
                phx_ft_bcast_hop_t hops[8];
                int nh = phx_ft_bcast_forward(b, 0, (unsigned)cube, 0, hops, 8);
                assert_int_equal(count_type(&c, PHX_FT_HB_BCASTMSG, -1), nh);
                for (int i = 0; i < nh; i++)
                    assert_int_equal(count_type(&c, PHX_FT_HB_BCASTMSG, hops[i].dst), 1);
                /* duplicate copy: nothing new */
                int before = c.ns;
                assert_int_equal(phx_ft_hb_on_msg(hb, origin, PHX_FT_HB_BCASTMSG, msg, len, 6), 0);
                assert_int_equal(c.ns, before);
                phx_ft_hb_stats_t st;
                phx_ft_hb_get_stats(hb, &st);
                assert_int_equal(st.bcast_dup, 1);
                phx_ft_hb_destroy(hb);
                phx_ft_bcast_destroy(b);
                cases++;
            }
        }
    }
    printf("hb: T5/FindEmitter exhaustive n=8: %ld (ring, origin, D) cases\n", cases);
}

/* A broadcast whose D holds us, and YOU_ARE_DEAD, fence; heartbeats from a
 * rank in D get YOU_ARE_DEAD back. */
static void test_fencing_paths(void **state)
{
    (void)state;
    struct cap c;
    uint8_t msg[128];
    int D[2] = { 0, 3 };
    phx_ft_hb_t *hb = mk(8, 3, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    size_t len = enc_bcast(msg, 1, 8, 1, 1, 0, 0, 0, D, 2);
    assert_int_equal(phx_ft_hb_on_msg(hb, 1, PHX_FT_HB_BCASTMSG, msg, len, 7), PHX_EFENCED);
    assert_int_equal(c.fenced, 1);
    assert_true(phx_ft_hb_is_fenced(hb));
    assert_int_equal(phx_ft_hb_tick(hb, 1000), PHX_EFENCED);
    assert_int_equal(phx_ft_hb_next_deadline(hb), UINT64_MAX);
    feed_simple(hb, 2, PHX_FT_HB_HEARTBEAT, 8, 9, PHX_EFENCED);
    assert_int_equal(c.fenced, 1);
    phx_ft_hb_destroy(hb);

    /* Node 4 learns 3 is dead, then 3 beats: YOU_ARE_DEAD; 3 takes it. */
    struct cap c3;
    phx_ft_hb_t *h4 = mk(8, 4, NULL, &c, 0), *h3 = mk(8, 3, NULL, &c3, 0);
    int D3[1] = { 3 };
    len = enc_bcast(msg, 5, 8, 5, 1, 3, 0, 0, D3, 1);
    /* 4 must relay some copy; find one */
    phx_ft_bcast_t *b;
    assert_int_equal(phx_ft_bcast_create(8, 5, D3, 1, &b), 0);
    int cube = phx_ft_bcast_forward(b, 4, 0, 0, NULL, 0) >= 0 ? 0 : 1;
    phx_ft_bcast_destroy(b);
    len = enc_bcast(msg, 5, 8, 5, 1, 3, cube, 0, D3, 1);
    assert_int_equal(phx_ft_hb_on_msg(h4, 5, PHX_FT_HB_BCASTMSG, msg, len, 1), 0);
    c.ns = 0;
    feed_simple(h4, 3, PHX_FT_HB_HEARTBEAT, 8, 2, 0);
    assert_int_equal(c.ns, 1);
    assert_int_equal(c.s[0].type, PHX_FT_HB_YOU_ARE_DEAD);
    assert_int_equal(c.s[0].dst, 3);
    assert_int_equal(phx_ft_hb_on_msg(h3, 4, PHX_FT_HB_YOU_ARE_DEAD, c.s[0].buf, c.s[0].len, 3),
                     PHX_EFENCED);
    assert_int_equal(c3.fenced, 1);
    /* A YOU_ARE_DEAD addressed to someone else is malformed. */
    struct cap c5;
    phx_ft_hb_t *h5 = mk(8, 5, NULL, &c5, 0);
    assert_int_equal(phx_ft_hb_on_msg(h5, 4, PHX_FT_HB_YOU_ARE_DEAD, c.s[0].buf, c.s[0].len, 3),
                     PHX_EPROTO);
    assert_int_equal(c5.fenced, 0);
    phx_ft_hb_destroy(h3);
    phx_ft_hb_destroy(h4);
    phx_ft_hb_destroy(h5);
}

/* Membership views (a rank rejoined): a new instance starts from the agreed
 * dead set without notices, and frames of another view are dropped. */
static void test_view_preset(void **state)
{
    (void)state;
    struct cap c;
    memset(&c, 0, sizeof c);
    phx_ft_hb_cfg_t cfg = { .nranks = 4, .rank = 0, .incarnation = 0, .view = 1, .delta_ns = DELTA };
    phx_ft_hb_env_t env = { .ctx = &c, .send = cap_send, .on_dead = cap_dead, .on_fenced = cap_fenced };
    phx_ft_hb_t *hb;
    assert_int_equal(phx_ft_hb_create(&cfg, &env, &hb), 0);
    int own = 0, d = 3;
    /* Rank 1 was taken back in as incarnation 2: a notice names it even
     * before its first heartbeat; an older one is refused from the start. */
    assert_int_equal(phx_ft_hb_preset_inc(hb, 1, 2), 0);
    assert_int_equal(phx_ft_hb_preset_inc(hb, 1, 1), 0);   /* never lowers */
    assert_int_equal(phx_ft_hb_incarnation(hb, 1), 2);
    assert_false(phx_ft_hb_accept(hb, 1, 1));
    assert_int_equal(phx_ft_hb_preset_inc(hb, 0, 1), PHX_EINVAL);   /* own */
    assert_int_equal(phx_ft_hb_preset_dead(hb, &own, 1), PHX_EINVAL);
    assert_int_equal(phx_ft_hb_preset_dead(hb, &d, 1), 0);
    assert_true(phx_ft_hb_is_dead(hb, 3));
    assert_int_equal(c.dead_calls[3], 0);      /* no notice: the runtime knows */
    assert_int_equal(phx_ft_hb_emitter(hb), 2);   /* ring repaired around 3 */
    assert_int_equal(phx_ft_hb_observer(hb), 1);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    assert_int_equal(phx_ft_hb_preset_dead(hb, &d, 1), PHX_EINVAL);   /* after start */
    assert_int_equal(phx_ft_hb_preset_inc(hb, 1, 2), PHX_EINVAL);
    uint8_t b[32];
    size_t len = enc_beat(b, 2, 0, 4, NULL, 0);   /* view 0: an older view */
    assert_int_equal(phx_ft_hb_on_msg(hb, 2, PHX_FT_HB_HEARTBEAT, b, len, 1), 0);
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.stale_view, 1);
    assert_int_equal(st.recv[PHX_FT_HB_HEARTBEAT], 0);
    b[2] = 1;   /* the same heartbeat in view 1 counts */
    assert_int_equal(phx_ft_hb_on_msg(hb, 2, PHX_FT_HB_HEARTBEAT, b, len, 2), 0);
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.recv[PHX_FT_HB_HEARTBEAT], 1);
    /* Our own frames carry the view. */
    assert_int_equal(phx_ft_hb_tick(hb, phx_ft_hb_next_deadline(hb)), 0);
    assert_true(c.ns > 0);
    assert_int_equal(c.s[c.ns - 1].buf[2], 1);
    phx_ft_hb_destroy(hb);
}

/* Incarnations: an older one is dropped, a newer one proves the rank died. */
static void test_incarnation(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk(4, 0, NULL, &c, 7);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    uint8_t b[32];
    size_t len = enc_beat(b, 3, 5, 4, NULL, 0);
    assert_int_equal(phx_ft_hb_on_msg(hb, 3, PHX_FT_HB_HEARTBEAT, b, len, 1), 0);
    assert_int_equal(phx_ft_hb_incarnation(hb, 3), 5);
    assert_true(phx_ft_hb_accept(hb, 3, 5));
    assert_false(phx_ft_hb_accept(hb, 3, 4));
    len = enc_beat(b, 3, 4, 4, NULL, 0);
    assert_int_equal(phx_ft_hb_on_msg(hb, 3, PHX_FT_HB_HEARTBEAT, b, len, 2), 0);
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.stale_inc, 1);
    assert_int_equal(phx_ft_hb_dead_count(hb), 0);
    c.ns = 0;
    len = enc_beat(b, 3, 6, 4, NULL, 0);
    assert_int_equal(phx_ft_hb_on_msg(hb, 3, PHX_FT_HB_HEARTBEAT, b, len, 3), 0);
    assert_true(phx_ft_hb_is_dead(hb, 3));
    assert_int_equal(c.dead_calls[3], 1);
    assert_int_equal(count_type(&c, PHX_FT_HB_YOU_ARE_DEAD, 3), 1);
    assert_int_equal(count_type(&c, PHX_FT_HB_NEWOBSERVER, 2), 1);   /* 3 was our emitter */
    assert_false(phx_ft_hb_accept(hb, 3, 6));
    phx_ft_hb_destroy(hb);
}

/* D grows in the order ranks joined it; a broadcast's whole D is merged. */
static void test_dead_order(void **state)
{
    (void)state;
    struct cap c;
    uint8_t msg[128];
    phx_ft_hb_t *hb = mk(8, 0, NULL, &c, 0);
    int D1[1] = { 5 }, D2[2] = { 2, 5 };
    phx_ft_bcast_t *b;
    assert_int_equal(phx_ft_bcast_create(8, 4, D1, 1, &b), 0);
    int cube = phx_ft_bcast_forward(b, 0, 0, 0, NULL, 0) >= 0 ? 0 : 1;
    phx_ft_bcast_destroy(b);
    size_t len = enc_bcast(msg, 4, 8, 4, 1, 5, cube, 0, D1, 1);
    assert_int_equal(phx_ft_hb_on_msg(hb, 4, PHX_FT_HB_BCASTMSG, msg, len, 1), 0);
    assert_int_equal(phx_ft_hb_dead_count(hb), 1);
    assert_int_equal(phx_ft_bcast_create(8, 4, D2, 2, &b), 0);
    cube = phx_ft_bcast_forward(b, 0, 0, 0, NULL, 0) >= 0 ? 0 : 1;
    phx_ft_bcast_destroy(b);
    len = enc_bcast(msg, 4, 8, 4, 2, 2, cube, 0, D2, 2);
    assert_int_equal(phx_ft_hb_on_msg(hb, 4, PHX_FT_HB_BCASTMSG, msg, len, 2), 0);
    assert_int_equal(phx_ft_hb_dead_count(hb), 2);
    int l[4];
    assert_int_equal(phx_ft_hb_dead_list(hb, l, 4), 2);
    assert_int_equal(l[0], 5);
    assert_int_equal(l[1], 2);
    assert_int_equal(c.dead_calls[5], 1);   /* not re-announced */
    phx_ft_hb_destroy(hb);
}

/* DSET: a heartbeat whose digest differs from ours gets our D with the
 * reply flag; a DSET is merged (once per rank), answered with the union
 * only if asked and we knew more, and fences us if it holds us. */
static void test_dset_exchange(void **state)
{
    (void)state;
    struct cap c;
    uint8_t m[128];
    phx_ft_hb_t *hb = mk_started(8, 0, &c);
    int D2[1] = { 2 }, D25[2] = { 2, 5 }, D0[2] = { 0, 6 }, bad[2] = { 5, 2 };
    size_t len = enc_dset(m, 7, 8, 0, D2, 1);   /* no reply wanted */
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 1), 0);
    assert_true(phx_ft_hb_is_dead(hb, 2));
    assert_int_equal(c.ns, 0);
    /* the emitter's heartbeat shows D = {}: it gets {2}, reply wanted */
    len = enc_beat(m, 7, 0, 8, NULL, 0);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_HEARTBEAT, m, len, 2), 0);
    assert_int_equal(c.ns, 1);
    assert_int_equal(c.s[0].type, PHX_FT_HB_DSET);
    assert_int_equal(c.s[0].len, enc_dset(m, 0, 8, 1, D2, 1));
    assert_memory_equal(c.s[0].buf, m, c.s[0].len);
    /* an equal digest: silence */
    len = enc_beat(m, 7, 0, 8, D2, 1);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_HEARTBEAT, m, len, 3), 0);
    assert_int_equal(c.ns, 1);
    /* {2,5} asking for a reply: 5 joins, nothing more to tell */
    len = enc_dset(m, 7, 8, 1, D25, 2);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 4), 0);
    assert_int_equal(phx_ft_hb_dead_count(hb), 2);
    assert_int_equal(c.ns, 1);
    /* {2} asking for a reply: we answer {2,5} */
    len = enc_dset(m, 7, 8, 1, D2, 1);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 5), 0);
    assert_int_equal(c.ns, 2);
    assert_int_equal(c.s[1].len, enc_dset(m, 0, 8, 0, D25, 2));
    assert_memory_equal(c.s[1].buf, m, c.s[1].len);
    assert_int_equal(c.dead_calls[2], 1);
    assert_int_equal(c.dead_calls[5], 1);
    /* malformed: unsorted, holding the sender, bad flags */
    len = enc_dset(m, 7, 8, 0, bad, 2);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 6), PHX_EPROTO);
    int self[1] = { 7 };
    len = enc_dset(m, 7, 8, 0, self, 1);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 6), PHX_EPROTO);
    len = enc_dset(m, 7, 8, 2, D2, 1);
    assert_int_equal(phx_ft_hb_on_msg(hb, 7, PHX_FT_HB_DSET, m, len, 6), PHX_EPROTO);
    /* holding us: fenced */
    len = enc_dset(m, 3, 8, 0, D0, 2);
    assert_int_equal(phx_ft_hb_on_msg(hb, 3, PHX_FT_HB_DSET, m, len, 7), PHX_EFENCED);
    assert_int_equal(c.fenced, 1);
    phx_ft_hb_destroy(hb);
}

/* D's join-order list is u16 up to 65,536 ranks and u32 past (a simulator
 * holds one instance per node): both keep the order and the rank values,
 * and a DSET lists D ascending. No on_dead here (preset), so ranks past
 * MAXN never reach the capture's arrays. */
static void test_dead_list_widths(void **state)
{
    (void)state;
    static const int ns[2] = { 65536, 65537 };
    static const int D[2][3] = { { 65535, 3, 40000 }, { 65536, 3, 65535 } };
    static const int sorted[2][3] = { { 3, 40000, 65535 }, { 3, 65535, 65536 } };
    for (int k = 0; k < 2; k++) {
        struct cap c;
        int n = ns[k], l[3];
        uint8_t m[64];
        phx_ft_hb_t *hb = mk(n, 0, NULL, &c, 0);
        assert_int_equal(phx_ft_hb_preset_dead(hb, D[k], 3), 0);
        assert_int_equal(phx_ft_hb_start(hb, 0), 0);
        assert_int_equal(phx_ft_hb_dead_list(hb, l, 3), 3);
        assert_memory_equal(l, D[k], sizeof l);
        /* the emitter (the last rank alive before us on the ring) shows D = {} */
        int em = phx_ft_hb_emitter(hb);
        size_t len = enc_beat(m, em, 0, n, NULL, 0);
        c.ns = 0;
        assert_int_equal(phx_ft_hb_on_msg(hb, em, PHX_FT_HB_HEARTBEAT, m, len, 1), 0);
        assert_int_equal(count_type(&c, PHX_FT_HB_DSET, em), 1);
        len = enc_dset(m, 0, n, 1, sorted[k], 3);
        assert_int_equal(c.s[c.ns - 1].len, len);
        assert_memory_equal(c.s[c.ns - 1].buf, m, len);
        phx_ft_hb_destroy(hb);
    }
}

/* Compact broadcast: past bcast_list_max a copy carries |D|,
 * D's digest and the origin's latest TAIL additions, over the topology of
 * all ranks; a relay passes each child it knows dead on to that child's
 * children. n = 64, 36 ranks dead and known to all (far past the k - 1 = 5
 * a member list without them would tolerate unknown): every live rank gets
 * each of the k trees' copies exactly once and nothing goes to a dead rank.
 * One relay misses an old death the tail does not carry: its |D| shows it
 * behind, it asks its sender once (DSET, reply wanted) and catches up. */
#define CN 64
struct cmsg { int src, dst; unsigned type; size_t len; uint8_t buf[512]; };

static void test_compact_bcast(void **state)
{
    (void)state;
    const int n = CN, k = 6;
    struct cap *c = calloc(CN, sizeof(*c));
    phx_ft_hb_t *hb[CN] = { 0 };
    uint8_t dead[CN] = { 0 };
    int K[CN], nk = 0;
    for (int r = 1; r < n; r++)
        if ((r * 7) % n < 37 && r != 9 && nk < 36) {
            dead[r] = 1;
            K[nk++] = r;
        }
    assert_int_equal(nk, 36);
    int behind = n - 1;
    while (dead[behind] || behind == 9)
        behind--;
    uint8_t m[512];
    for (int r = 0; r < n; r++) {
        if (dead[r])
            continue;
        phx_ft_hb_cfg_t cfg = { .nranks = n, .rank = r, .incarnation = 0, .delta_ns = DELTA,
                                .bcast_list_max = -1 };
        phx_ft_hb_env_t env = { .ctx = &c[r], .send = cap_send, .on_dead = cap_dead,
                                .on_fenced = cap_fenced };
        assert_int_equal(phx_ft_hb_create(&cfg, &env, &hb[r]), 0);
        int from = r ? 0 : 9;   /* live, not us */
        size_t len = r == behind ? enc_dset(m, from, n, 0, K + 1, nk - 1)   /* misses K[0] */
                                 : enc_dset(m, from, n, 0, K, nk);
        assert_int_equal(phx_ft_hb_on_msg(hb[r], from, PHX_FT_HB_DSET, m, len, 1), 0);
        c[r].ns = 0;
    }
    /* Rank 9 comes back with a new incarnation: rank 0 declares it and
     * starts the broadcast (|D| = 37 > TAIL: compact, the tail lacks K[0]). */
    size_t len = enc_beat(m, 9, 1, n, K, nk);
    assert_int_equal(phx_ft_hb_on_msg(hb[0], 9, PHX_FT_HB_HEARTBEAT, m, len, 2), 0);
    len = enc_beat(m, 9, 2, n, K, nk);
    assert_int_equal(phx_ft_hb_on_msg(hb[0], 9, PHX_FT_HB_HEARTBEAT, m, len, 3), 0);
    dead[9] = 1;
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(hb[0], &st);
    assert_int_equal(st.bcast_compact, 1);
    /* Deliver BCASTMSG and DSET among the living, FIFO. */
    size_t qcap = 4096, qh = 0, qt = 0;
    struct cmsg *q = calloc(qcap, sizeof(*q));
    int got[CN][8] = { { 0 } }, to_dead = 0, pulls = 0;
    for (int i = 0; i < c[0].ns; i++) {   /* rank 0's output first */
        struct sent *x = &c[0].s[i];
        if (x->type == PHX_FT_HB_BCASTMSG || x->type == PHX_FT_HB_DSET) {
            q[qt] = (struct cmsg){ 0, x->dst, x->type, x->len, { 0 } };
            memcpy(q[qt++].buf, x->buf, x->len);
        }
    }
    c[0].ns = 0;
    while (qh < qt) {
        struct cmsg *e = &q[qh++];
        if (dead[e->dst]) {
            to_dead += e->type == PHX_FT_HB_BCASTMSG;
            continue;
        }
        if (e->type == PHX_FT_HB_BCASTMSG) {
            assert_int_equal(e->buf[30] | e->buf[31] << 8, 1);   /* compact flag (LE u16) */
            got[e->dst][e->buf[28] * k + e->buf[29]]++;
        } else if (e->buf[16] & 1) {
            pulls++;
            assert_int_equal(e->src, behind);
        }
        assert_int_equal(phx_ft_hb_on_msg(hb[e->dst], e->src, e->type, e->buf, e->len, 4), 0);
        struct cap *o = &c[e->dst];
        for (int i = 0; i < o->ns; i++) {
            struct sent *x = &o->s[i];
            if (x->type != PHX_FT_HB_BCASTMSG && x->type != PHX_FT_HB_DSET)
                continue;
            assert_true(qt < qcap);
            q[qt] = (struct cmsg){ e->dst, x->dst, x->type, x->len, { 0 } };
            memcpy(q[qt++].buf, x->buf, x->len);
        }
        o->ns = 0;
    }
    assert_int_equal(to_dead, 0);
    assert_int_equal(pulls, 1);
    uint64_t bypass = 0;
    for (int r = 0; r < n; r++) {
        if (dead[r])
            continue;
        phx_ft_hb_get_stats(hb[r], &st);
        bypass += st.bcast_bypass;
        assert_int_equal(phx_ft_hb_dead_count(hb[r]), nk + 1);
        assert_true(phx_ft_hb_is_dead(hb[r], 9) && phx_ft_hb_is_dead(hb[r], K[0]));
        for (int t = 0; r && t < k; t++)
            assert_int_equal(got[r][t], 1);
        assert_int_equal(st.bcast_pull, r == behind);
    }
    for (int r = 0; r < n; r++)
        phx_ft_hb_destroy(hb[r]);   /* rank 9's too (NULL: never created) */
    assert_true(bypass > 0);
    free(q);
    free(c);
}

/* Stalls. T3 declares on a confirmation tick, so a
 * heartbeat that arrived while we were late re-arms instead. A late thread
 * (gap past 2 eta, below the stall slack) moves the deadline by at most
 * delta past its nominal value: declared by 2 delta of silence. A gap past
 * the slack gives the emitter a fresh delta and puts us in doubt only if it
 * was long enough (delta - 2 eta) for our observer to declare us. */
static void test_stall_and_jitter(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk_started(5, 0, &c);
    feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, 2 * DELTA, 0);
    run_to(hb, 3 * DELTA);   /* nominal deadline 3 delta: confirmation armed */
    assert_false(phx_ft_hb_is_dead(hb, 4));
    assert_int_equal(phx_ft_hb_next_deadline(hb), 3 * DELTA + 1);
    feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, 3 * DELTA, 0);   /* was in the socket */
    run_to(hb, 4 * DELTA - 1);
    assert_false(phx_ft_hb_is_dead(hb, 4));
    /* late by 0.3 delta each time: extended, but declared by nominal + delta */
    for (uint64_t t = 4 * DELTA + 3 * DELTA / 10; !phx_ft_hb_is_dead(hb, 4); t += 3 * DELTA / 10) {
        assert_true(t <= 5 * DELTA + 3 * DELTA / 10);
        assert_int_equal(phx_ft_hb_tick(hb, t), 0);
        run_to(hb, t + 1);   /* the confirmation tick */
    }
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.stalls, 0);
    assert_true(st.late >= 3);
    assert_false(phx_ft_hb_in_doubt(hb, 5 * DELTA));
    phx_ft_hb_destroy(hb);

    /* a stop of 2 delta: fresh delta for the emitter, in doubt for 2 delta */
    hb = mk_started(5, 0, &c);
    feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, 2 * DELTA, 0);
    run_to(hb, 2 * DELTA);
    uint64_t back = 4 * DELTA;
    assert_int_equal(phx_ft_hb_tick(hb, back), 0);
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.stalls, 1);
    assert_false(phx_ft_hb_is_dead(hb, 4));
    assert_true(phx_ft_hb_in_doubt(hb, back));
    assert_true(phx_ft_hb_in_doubt(hb, back + 2 * DELTA));
    assert_false(phx_ft_hb_in_doubt(hb, back + 2 * DELTA + 1));
    run_to(hb, back + DELTA - 1);
    assert_false(phx_ft_hb_is_dead(hb, 4));
    run_to(hb, back + DELTA + 1);
    assert_true(phx_ft_hb_is_dead(hb, 4));
    phx_ft_hb_destroy(hb);

    /* a stop of 0.6 delta: a stall (fresh delta) but not in doubt */
    hb = mk_started(5, 0, &c);
    run_to(hb, DELTA);
    assert_int_equal(phx_ft_hb_tick(hb, DELTA + 6 * DELTA / 10), 0);
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.stalls, 1);
    assert_false(phx_ft_hb_in_doubt(hb, DELTA + 6 * DELTA / 10));
    phx_ft_hb_destroy(hb);
}

/* A hint shortens the emitter's timer to now + grace only, never declares
 * by itself: the observer's T3 does, one tick after the deadline. */
static void check_hint(int (*suspect)(phx_ft_hb_t *, int, uint64_t), uint64_t grace)
{
    struct cap c;
    phx_ft_hb_t *hb = mk(5, 0, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, 3 * DELTA, 0);
    assert_int_equal(suspect(hb, 2, 3 * DELTA), 0);   /* not the emitter */
    assert_int_equal(suspect(hb, 9, 3 * DELTA), PHX_EINVAL);
    assert_int_equal(suspect(hb, 4, 3 * DELTA + 1), 1);
    assert_int_equal(phx_ft_hb_dead_count(hb), 0);
    assert_true(phx_ft_hb_next_deadline(hb) <= 3 * DELTA + 1 + grace);
    uint64_t t;
    while ((t = phx_ft_hb_next_deadline(hb)) <= 3 * DELTA + 2 + grace)
        assert_int_equal(phx_ft_hb_tick(hb, t), 0);
    assert_true(phx_ft_hb_is_dead(hb, 4));
    phx_ft_hb_destroy(hb);
}

/* suspect(): a TCP reset; grace delta/2. */
static void test_suspect_hint(void **state)
{
    (void)state;
    check_hint(phx_ft_hb_suspect, DELTA / 2);
}

/* suspect_gone(): the rank's port refused a redial; no grace. Right
 * after a stall of ours the refusal may mean the others declared us and
 * left: it only arms the timer then, as a hint, and T3 declares one tick
 * after the deadline. */
static void test_suspect_gone(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk_started(5, 0, &c);
    uint64_t t = 0;
    for (; t < DELTA; t += DELTA / 10) {
        run_to(hb, t);
        feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, t, 0);
    }
    run_to(hb, t);
    t += DELTA;   /* not running for delta: a stall */
    feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, t, 0);
    assert_true(phx_ft_hb_in_doubt(hb, t + 1));
    assert_int_equal(phx_ft_hb_suspect_gone(hb, 4, t + 1), 1);
    assert_int_equal(phx_ft_hb_dead_count(hb), 0);
    assert_true(phx_ft_hb_next_deadline(hb) <= t + 1);
    uint64_t d;
    while ((d = phx_ft_hb_next_deadline(hb)) <= t + 2)
        assert_int_equal(phx_ft_hb_tick(hb, d), 0);
    assert_true(phx_ft_hb_is_dead(hb, 4));
    phx_ft_hb_destroy(hb);
}

/* Otherwise a refused port is a gone process: no heartbeat of it can still
 * arrive, so suspect_gone() declares it within the call (T3's decision,
 * broadcast included), without the confirmation tick that waits for late
 * heartbeats. */
static void test_suspect_gone_declares_at_once(void **state)
{
    (void)state;
    struct cap c;
    phx_ft_hb_t *hb = mk_started(5, 0, &c);
    uint64_t t = 0;
    for (; t < 3 * DELTA; t += DELTA / 10) {
        run_to(hb, t);
        feed_simple(hb, 4, PHX_FT_HB_HEARTBEAT, 5, t, 0);
    }
    run_to(hb, t);
    assert_int_equal(count_type(&c, PHX_FT_HB_BCASTMSG, -1), 0);
    assert_int_equal(phx_ft_hb_suspect_gone(hb, 4, t + 1), 1);
    assert_true(phx_ft_hb_is_dead(hb, 4));
    assert_int_equal(c.dead_calls[4], 1);
    assert_true(count_type(&c, PHX_FT_HB_BCASTMSG, -1) > 0);
    assert_int_equal(phx_ft_hb_emitter(hb), 3);
    phx_ft_hb_stats_t st;
    phx_ft_hb_get_stats(hb, &st);
    assert_int_equal(st.declared, 1);
    /* Not the emitter: ignored, as any hint. */
    assert_int_equal(phx_ft_hb_suspect_gone(hb, 2, t + 2), 0);
    assert_false(phx_ft_hb_is_dead(hb, 2));
    phx_ft_hb_destroy(hb);
}

/* Malformed input: PHX_EPROTO with no send, no callback and no state change.
 * Mutates valid messages (bit flips, truncation, extension, wrong type or
 * source) and random garbage. */
struct snap {
    int nd, em, ob, fenced, ns;
    uint64_t dl;
    int list[MAXN];
    phx_ft_hb_stats_t st;
};

static void take(phx_ft_hb_t *hb, const struct cap *c, struct snap *s)
{
    memset(s, 0, sizeof(*s));
    s->nd = phx_ft_hb_dead_list(hb, s->list, MAXN);
    s->em = phx_ft_hb_emitter(hb);
    s->ob = phx_ft_hb_observer(hb);
    s->fenced = phx_ft_hb_is_fenced(hb);
    s->dl = phx_ft_hb_next_deadline(hb);
    s->ns = c->ns;
    phx_ft_hb_get_stats(hb, &s->st);
}

static void test_malformed_fuzz(void **state)
{
    (void)state;
    rng_state = 0xfeedfaceull;
    const int n = 16;
    long eproto = 0, accepted = 0;
    struct cap c;
    phx_ft_hb_t *hb = mk(n, 0, NULL, &c, 0);
    assert_int_equal(phx_ft_hb_start(hb, 0), 0);
    for (int iter = 0; iter < 60000; iter++) {
        uint8_t m[256];
        size_t len;
        int src = 1 + (int)rnd_below(n - 1);
        unsigned type = 1 + (unsigned)rnd_below(5);
        switch (type) {
        case PHX_FT_HB_BCASTMSG: {
            int D[4] = { 3, 6, 9, 12 }, nd = 1 + (int)rnd_below(4);
            int origin = D[nd - 1] + 1;
            len = enc_bcast(m, src, n, origin, (uint32_t)iter, D[0], (int)rnd_below(2),
                            (int)rnd_below(4), D, nd);
            break;
        }
        case PHX_FT_HB_YOU_ARE_DEAD:
            len = enc_hdr(m, type, src, 0, n);
            le32(m + 16, 0);
            le32(m + 20, 0);
            len += 8;
            break;
        case PHX_FT_HB_HEARTBEAT:
            len = enc_beat(m, src, 0, n, NULL, 0);
            break;
        case PHX_FT_HB_DSET: {
            int D[3] = { 4, 7, 11 }, nd = (int)rnd_below(4);
            len = enc_dset(m, src, n, (unsigned)rnd_below(2), D, nd);
            break;
        }
        default:
            len = enc_hdr(m, type, src, 0, n);
        }
        int mode = (int)rnd_below(6);
        if (mode == 0) {
            m[rnd_below(len)] ^= (uint8_t)(1u << rnd_below(8));
        } else if (mode == 1) {
            len = rnd_below(len);
        } else if (mode == 2) {
            size_t extra = 1 + rnd_below(8);
            for (size_t i = 0; i < extra; i++)
                m[len + i] = (uint8_t)rnd();
            len += extra;
        } else if (mode == 3) {
            type = (unsigned)rnd_below(7);
        } else if (mode == 4) {
            len = rnd_below(sizeof m);
            for (size_t i = 0; i < len; i++)
                m[i] = (uint8_t)rnd();
        } else {
            src = (int)rnd_below(n + 2) - 1;
        }
        struct snap a, b;
        take(hb, &c, &a);
        int rc = phx_ft_hb_on_msg(hb, src, type, m, len, 1000 + (uint64_t)iter);
        if (rc == PHX_EPROTO) {
            take(hb, &c, &b);
            assert_memory_equal(&a, &b, sizeof a);
            eproto++;
        } else if (rc == PHX_EFENCED) {
            /* a mutation produced a valid YOU_ARE_DEAD: start over */
            phx_ft_hb_destroy(hb);
            hb = mk(n, 0, NULL, &c, 0);
            assert_int_equal(phx_ft_hb_start(hb, 0), 0);
            accepted++;
        } else {
            assert_int_equal(rc, 0);
            accepted++;
        }
        if (c.ns > 200)
            c.ns = 0;
        if (phx_ft_hb_dead_count(hb) > 8) {
            phx_ft_hb_destroy(hb);
            hb = mk(n, 0, NULL, &c, 0);
            assert_int_equal(phx_ft_hb_start(hb, 0), 0);
        }
    }
    assert_true(eproto > 10000 && accepted > 1000);
    phx_ft_hb_destroy(hb);
    printf("hb: malformed fuzz: %ld rejected with state unchanged, %ld accepted\n", eproto,
           accepted);
}

/* ------------------------------------------------------------------------ */
/* Ring order                                                               */

static int max_host(int n, const uint32_t *host)
{
    int best = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; j < n; j++)
            k += host[j] == host[i];
        if (k > best)
            best = k;
    }
    return best;
}

static void check_ring(int n, const uint32_t *host)
{
    int ring[256], ring2[256], pos[256];
    assert_int_equal(phx_ft_ring_build(n, host, ring), 0);
    assert_int_equal(phx_ft_ring_invert(n, ring, pos), 0);   /* a permutation */
    assert_int_equal(phx_ft_ring_build(n, host, ring2), 0);
    assert_memory_equal(ring, ring2, sizeof(int) * (size_t)n);
    if (n >= 3) {
        int m = max_host(n, host), opt = 2 * m - n > 0 ? 2 * m - n : 0;
        assert_int_equal(phx_ft_ring_conflicts(n, host, ring), opt);
    }
}

static void test_ring_order(void **state)
{
    (void)state;
    long cases = 0;
    /* Every partition of ranks into hosts for n <= 9 (restricted growth
     * strings), host ids scrambled so that id order != rank order. */
    for (int n = 1; n <= 9; n++) {
        int a[16] = { 0 };
        for (;;) {
            uint32_t host[16];
            for (int i = 0; i < n; i++)
                host[i] = (uint32_t)(1000 - 37 * a[i]);
            check_ring(n, host);
            cases++;
            int i = n - 1;
            for (; i > 0; i--) {
                int mx = 0;
                for (int j = 0; j < i; j++)
                    if (a[j] > mx)
                        mx = a[j];
                if (a[i] <= mx) {
                    a[i]++;
                    for (int j = i + 1; j < n; j++)
                        a[j] = 0;
                    break;
                }
            }
            if (i == 0)
                break;
        }
    }
    rng_state = 42;
    for (int iter = 0; iter < 3000; iter++) {
        int n = 10 + (int)rnd_below(200);
        int nh = 1 + (int)rnd_below(12);
        uint32_t host[256];
        for (int i = 0; i < n; i++)
            host[i] = (uint32_t)rnd_below((uint64_t)nh) * 7919u;
        check_ring(n, host);
        cases++;
    }
    /* Equal hosts are visited round-robin: any 4 ring neighbours of 4 hosts
     * x 4 ranks are on 4 different hosts. */
    uint32_t host[16];
    int ring[16];
    for (int r = 0; r < 16; r++)
        host[r] = (uint32_t)(r / 4);
    assert_int_equal(phx_ft_ring_build(16, host, ring), 0);
    for (int i = 0; i < 16; i++) {
        unsigned seen = 0;
        for (int j = 0; j < 4; j++)
            seen |= 1u << host[ring[(i + j) % 16]];
        assert_int_equal(seen, 0xfu);
    }
    assert_int_equal(phx_ft_ring_build(0, host, ring), PHX_EINVAL);
    int bad[3] = { 0, 0, 1 }, pos[3];
    assert_int_equal(phx_ft_ring_invert(3, bad, pos), PHX_EINVAL);
    printf("hb: ring order: %ld host layouts, all optimal and deterministic\n", cases);
}

/* ------------------------------------------------------------------------ */
/* Discrete-event simulator                                                 */

struct ev {
    uint64_t t, seq;
    int src, dst;
    unsigned type;
    size_t len;
    uint8_t buf[320];
};

enum { ACT_CRASH, ACT_PAUSE, ACT_RESUME, ACT_HINT };
struct act {
    uint64_t t;
    int kind, rank, arg;
};

struct sim;
struct node {
    struct sim *sim;
    int rank;
    phx_ft_hb_t *hb;
    int crashed, paused;
    uint64_t crash_t;       /* crash or pause start */
    struct ev *pend[4096];  /* delivered while paused, in order */
    int npend;
    int dead_calls[MAXN];
    uint64_t dead_at[MAXN];
    int fenced;
    uint64_t fenced_at;
};

struct sim {
    int n;
    uint64_t now, tau, seq;
    int ring[MAXN];
    struct node nd[MAXN];
    struct ev **heap;
    int nheap, capheap;
    uint64_t last_deliver[MAXN][MAXN];
    struct act acts[64];
    int nacts;
    int resume_msgs_first;
    /* when trigger_rank is first declared dead, crash trigger_victim
     * (-1: the declarer) trigger_delay later */
    int trigger_rank, trigger_victim;
    uint32_t trigger_mask;   /* if set: crash all of these instead of the victim */
    uint64_t trigger_delay;
    int false_dead;          /* a live, never-paused rank was declared */
    long msgs, events;
};

static int ev_less(const struct ev *a, const struct ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(struct sim *s, struct ev *e)
{
    if (s->nheap == s->capheap) {
        s->capheap = s->capheap ? 2 * s->capheap : 1024;
        s->heap = realloc(s->heap, sizeof(*s->heap) * (size_t)s->capheap);
        assert_non_null(s->heap);
    }
    int i = s->nheap++;
    while (i > 0 && ev_less(e, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

static struct ev *heap_pop(struct sim *s)
{
    struct ev *top = s->heap[0], *last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const struct ev *cur = last;
        if (l < s->nheap && ev_less(s->heap[l], cur))
            m = l, cur = s->heap[l];
        if (r < s->nheap && ev_less(s->heap[r], cur))
            m = r;
        if (m == i)
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (s->nheap)
        s->heap[i] = last;
    return top;
}

static void sim_send(void *ctx, int dst, unsigned type, const void *buf, size_t len)
{
    struct node *nd = ctx;
    struct sim *s = nd->sim;
    assert_true(dst >= 0 && dst < s->n && dst != nd->rank);
    assert_false(nd->crashed);
    assert_true(len <= sizeof(((struct ev *)0)->buf));
    assert_int_not_equal(phx_ft_hb_frame_type(type), 0);
    struct ev *e = malloc(sizeof(*e));
    assert_non_null(e);
    /* TCP: FIFO per link, each message within tau. */
    uint64_t t = s->now + 1 + rnd_below(s->tau);
    if (t < s->last_deliver[nd->rank][dst])
        t = s->last_deliver[nd->rank][dst];
    s->last_deliver[nd->rank][dst] = t;
    *e = (struct ev){ .t = t, .seq = s->seq++, .src = nd->rank, .dst = dst, .type = type,
                      .len = len };
    memcpy(e->buf, buf, len);
    heap_push(s, e);
    s->msgs++;
}

static void schedule(struct sim *s, uint64_t t, int kind, int rank, int arg)
{
    assert_true(s->nacts < 64);
    s->acts[s->nacts++] = (struct act){ t, kind, rank, arg };
}

static void sim_dead(void *ctx, int rank, uint64_t now)
{
    struct node *nd = ctx;
    struct sim *s = nd->sim;
    nd->dead_calls[rank]++;
    nd->dead_at[rank] = now;
    const struct node *v = &s->nd[rank];
    if (!v->crashed && !v->paused && !v->fenced && v->crash_t == 0)
        s->false_dead = 1;
    if (rank == s->trigger_rank) {
        s->trigger_rank = -1;
        int victim = s->trigger_victim < 0 ? nd->rank : s->trigger_victim;
        for (int r = 0; r < s->n && s->trigger_mask; r++)
            if (s->trigger_mask & (1u << r))
                schedule(s, now + s->trigger_delay, ACT_CRASH, r, 0);
        if (!s->trigger_mask)
            schedule(s, now + s->trigger_delay, ACT_CRASH, victim, 0);
    }
}

static void sim_fenced(void *ctx)
{
    struct node *nd = ctx;
    nd->fenced = 1;
    nd->fenced_at = nd->sim->now;
}

/* cfg.bcast_list_max of sim_new's nodes (0: the default). */
static int sim_list_max;

static struct sim *sim_new(int n, uint64_t tau, uint64_t seed, const uint32_t *hosts)
{
    struct sim *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    s->n = n;
    s->tau = tau;
    s->trigger_rank = -1;
    if (hosts) {
        uint32_t h[MAXN];
        memcpy(h, hosts, sizeof(uint32_t) * (size_t)n);
        assert_int_equal(phx_ft_ring_build(n, h, s->ring), 0);
    } else {
        for (int i = 0; i < n; i++)
            s->ring[i] = i;
    }
    for (int r = 0; r < n; r++) {
        struct node *nd = &s->nd[r];
        nd->sim = s;
        nd->rank = r;
        phx_ft_hb_cfg_t cfg = { .nranks = n, .rank = r, .incarnation = 1, .ring = s->ring,
                                .delta_ns = DELTA, .bcast_list_max = sim_list_max };
        phx_ft_hb_env_t env = { .ctx = nd, .send = sim_send, .on_dead = sim_dead,
                                .on_fenced = sim_fenced };
        assert_int_equal(phx_ft_hb_create(&cfg, &env, &nd->hb), 0);
    }
    for (int r = 0; r < n; r++)
        assert_int_equal(phx_ft_hb_start(s->nd[r].hb, rnd_below(tau)), 0);
    return s;
}

static void sim_free(struct sim *s)
{
    for (int r = 0; r < s->n; r++) {
        phx_ft_hb_destroy(s->nd[r].hb);
        for (int i = 0; i < s->nd[r].npend; i++)
            free(s->nd[r].pend[i]);
    }
    while (s->nheap)
        free(heap_pop(s));
    free(s->heap);
    free(s);
}

static int runnable(const struct node *nd) { return !nd->crashed && !nd->paused && !nd->fenced; }

static void deliver(struct sim *s, struct ev *e)
{
    struct node *nd = &s->nd[e->dst];
    if (nd->crashed || nd->fenced) {
        free(e);
        return;
    }
    if (nd->paused) {
        assert_true(nd->npend < 4096);
        nd->pend[nd->npend++] = e;
        return;
    }
    s->now = s->now > e->t ? s->now : e->t;
    int rc = phx_ft_hb_on_msg(nd->hb, e->src, e->type, e->buf, e->len, s->now);
    assert_true(rc == 0 || rc == PHX_EFENCED);
    free(e);
}

static void do_act(struct sim *s, const struct act *a)
{
    struct node *nd = &s->nd[a->rank];
    switch (a->kind) {
    case ACT_CRASH:
        if (!nd->crashed && !nd->crash_t)
            nd->crash_t = s->now;
        nd->crashed = 1;
        break;
    case ACT_PAUSE:
        nd->paused = 1;
        nd->crash_t = s->now;
        break;
    case ACT_RESUME: {
        nd->paused = 0;
        if (nd->crashed)
            break;
        /* libuv runs due timers before polling sockets by default; both
         * orders are exercised. */
        if (!s->resume_msgs_first && !nd->fenced)
            (void)phx_ft_hb_tick(nd->hb, s->now);
        for (int i = 0; i < nd->npend; i++) {
            struct ev *e = nd->pend[i];
            if (!nd->fenced)
                (void)phx_ft_hb_on_msg(nd->hb, e->src, e->type, e->buf, e->len, s->now);
            free(e);
        }
        nd->npend = 0;
        if (s->resume_msgs_first && !nd->fenced)
            (void)phx_ft_hb_tick(nd->hb, s->now);
        break;
    }
    case ACT_HINT:
        if (runnable(nd))
            (void)phx_ft_hb_suspect(nd->hb, a->arg, s->now);
        break;
    }
}

static void sim_run(struct sim *s, uint64_t until)
{
    for (;;) {
        uint64_t tt = UINT64_MAX;
        int who = -1;
        for (int r = 0; r < s->n; r++) {
            if (!runnable(&s->nd[r]))
                continue;
            uint64_t d = phx_ft_hb_next_deadline(s->nd[r].hb);
            if (d < tt)
                tt = d, who = r;
        }
        uint64_t tm = s->nheap ? s->heap[0]->t : UINT64_MAX;
        int ai = -1;
        uint64_t ta = UINT64_MAX;
        for (int i = 0; i < s->nacts; i++)
            if (s->acts[i].t < ta)
                ta = s->acts[i].t, ai = i;
        uint64_t t = tt < tm ? tt : tm;
        t = ta < t ? ta : t;
        if (t > until) {
            s->now = until;
            return;
        }
        s->events++;
        if (ta == t) {
            struct act a = s->acts[ai];
            s->acts[ai] = s->acts[--s->nacts];
            s->now = t;
            do_act(s, &a);
        } else if (tm == t) {
            deliver(s, heap_pop(s));
        } else {
            s->now = t;
            assert_int_equal(phx_ft_hb_tick(s->nd[who].hb, t), 0);
        }
    }
}

/* Survivors (not crashed, not fenced) agree on D == expect, each learned
 * each failure once, the ring is the live ring, and every failure reached
 * every survivor within `bound` of its crash (if bound != 0). */
static void check_outcome(struct sim *s, const uint8_t *expect, uint64_t bound, uint64_t *worst)
{
    int live[MAXN], nl = 0;
    for (int i = 0; i < s->n; i++) {
        int r = s->ring[i];
        if (!expect[r])
            live[nl++] = r;
    }
    assert_false(s->false_dead);
    for (int i = 0; i < nl; i++) {
        struct node *nd = &s->nd[live[i]];
        assert_false(nd->crashed);
        assert_false(nd->fenced);
        for (int r = 0; r < s->n; r++) {
            assert_int_equal(phx_ft_hb_is_dead(nd->hb, r), expect[r]);
            assert_int_equal(nd->dead_calls[r], expect[r]);
            if (expect[r] && bound) {
                uint64_t lat = nd->dead_at[r] - s->nd[r].crash_t;
                if (worst && lat > *worst)
                    *worst = lat;
                if (lat > bound)
                    fail_msg("rank %d learned %d dead after %llu ns > bound %llu", live[i], r,
                             (unsigned long long)lat, (unsigned long long)bound);
            }
        }
        if (nl > 1) {
            assert_int_equal(phx_ft_hb_emitter(nd->hb), live[(i - 1 + nl) % nl]);
            assert_int_equal(phx_ft_hb_observer(nd->hb), live[(i + 1) % nl]);
        }
    }
}

/* No false suspicion when every heartbeat arrives within delta: link
 * delays up to tau = 0.85 delta with eta = 0.1 delta keep every gap below
 * delta. */
static void test_sim_no_false_suspicion(void **state)
{
    (void)state;
    const int ns[] = { 2, 3, 5, 8, 13, 16, 33 };
    long runs = 0, msgs = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            uint64_t tau = seed == 1 ? DELTA / 20 : (DELTA * 85) / 100;
            struct sim *s = sim_new(ns[i], tau, seed, NULL);
            sim_run(s, 100 * DELTA);
            uint8_t none[MAXN] = { 0 };
            check_outcome(s, none, 0, NULL);
            msgs += s->msgs;
            sim_free(s);
            runs++;
        }
    }
    printf("hb sim: no false suspicion: %ld runs of 100 delta, %ld messages\n", runs, msgs);
}

static uint64_t bcast_time(int n_live, uint64_t tau)
{
    return (uint64_t)(floor_log2(n_live) + 1) * tau;
}

/* Every rank crashes alone once: T(1) <= 2 delta + tau + broadcast. */
static void test_sim_single_failure(void **state)
{
    (void)state;
    const int ns[] = { 2, 3, 8, 13, 16 };
    long runs = 0;
    uint64_t worst = 0, tau = DELTA / 20;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int n = ns[i];
        for (int victim = 0; victim < n; victim++) {
            struct sim *s = sim_new(n, tau, 100 + (uint64_t)victim, NULL);
            schedule(s, 3 * DELTA + rnd_below(DELTA), ACT_CRASH, victim, 0);
            sim_run(s, 12 * DELTA);
            uint8_t exp[MAXN] = { 0 };
            exp[victim] = 1;
            check_outcome(s, exp, 2 * DELTA + tau + bcast_time(n - 1, tau), &worst);
            sim_free(s);
            runs++;
        }
    }
    printf("hb sim: single failures: %ld runs, worst T(1) %.3f delta (bound 2 delta + tau + B)\n",
           runs, (double)worst / DELTA);
}

/* f consecutive ring neighbours crash at once (the worst case for repair),
 * f = 1, 2, floor(log2 n) - 1; bound from the seed's theorem,
 * T(f) <= f(f+1) delta + f tau + f(f+1)/2 * B(n), B(n) = 8 tau log2 n. */
static void test_sim_consecutive_failures(void **state)
{
    (void)state;
    const int ns[] = { 8, 13, 16, 32, 64 };
    long runs = 0;
    uint64_t tau = DELTA / 20;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int n = ns[i], k = floor_log2(n);
        uint32_t hosts[MAXN];
        for (int r = 0; r < n; r++)
            hosts[r] = (uint32_t)(r % 4);   /* 4 hosts, ring jumps over them */
        int fs[3] = { 1, 2, k - 1 };
        for (int fi = 0; fi < 3; fi++) {
            int f = fs[fi];
            for (uint64_t seed = 1; seed <= 4; seed++) {
                struct sim *s = sim_new(n, tau, seed * 31 + (uint64_t)f, hosts);
                int start = (int)rnd_below((uint64_t)n);
                uint8_t exp[MAXN] = { 0 };
                uint64_t t = 3 * DELTA + rnd_below(DELTA);
                for (int j = 0; j < f; j++) {
                    int r = s->ring[(start + j) % n];
                    exp[r] = 1;
                    schedule(s, t, ACT_CRASH, r, 0);
                }
                uint64_t B = (uint64_t)(8 * k) * tau;
                uint64_t bound = (uint64_t)(f * (f + 1)) * DELTA + (uint64_t)f * tau +
                                 (uint64_t)(f * (f + 1) / 2) * B;
                sim_run(s, t + bound + 40 * DELTA);   /* and stays stable */
                check_outcome(s, exp, bound, NULL);
                sim_free(s);
                runs++;
            }
        }
    }
    printf("hb sim: consecutive failures f=1,2,log2(n)-1: %ld runs, n in {8,13,16,32,64}\n", runs);
}

/* A second kill while the first failure's broadcast is in flight: the
 * declarer itself, or a random relay, dies tau/2 after the declaration. */
static void test_sim_kill_during_propagation(void **state)
{
    (void)state;
    long runs = 0;
    uint64_t tau = DELTA / 20;
    const int ns[] = { 8, 13, 16, 32 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int n = ns[i];
        for (uint64_t seed = 1; seed <= 8; seed++) {
            struct sim *s = sim_new(n, tau, 500 + seed, NULL);
            int x = (int)rnd_below((uint64_t)n);
            int relay = seed & 1 ? -1 : (x + 2 + (int)rnd_below((uint64_t)n - 3)) % n;
            s->trigger_rank = x;
            s->trigger_victim = relay;
            s->trigger_delay = tau / 2 + rnd_below(tau);
            schedule(s, 3 * DELTA, ACT_CRASH, x, 0);
            sim_run(s, 20 * DELTA);
            uint8_t exp[MAXN] = { 0 };
            exp[x] = 1;
            int second = relay < 0 ? s->ring[(x + 1) % n] : relay;   /* identity ring */
            assert_true(s->nd[second].crashed);
            exp[second] = 1;
            check_outcome(s, exp, 0, NULL);
            sim_free(s);
            runs++;
        }
    }
    printf("hb sim: kill during propagation: %ld runs\n", runs);
}

/* A node stopped for longer than delta is declared dead by all, declares
 * nobody, and calls on_fenced soon after it resumes; a short stop is
 * harmless. Both resume orders (timers first, sockets first). */
static void test_sim_pause(void **state)
{
    (void)state;
    long runs = 0;
    uint64_t tau = DELTA / 20, worst_fence = 0;
    const int n = 8;
    for (int v = 0; v < n; v++) {
        for (int order = 0; order < 2; order++) {
            struct sim *s = sim_new(n, tau, 900 + (uint64_t)(v * 2 + order), NULL);
            s->resume_msgs_first = order;
            uint64_t t = 3 * DELTA + rnd_below(DELTA);
            uint64_t resume = t + 3 * DELTA;
            schedule(s, t, ACT_PAUSE, v, 0);
            schedule(s, resume, ACT_RESUME, v, 0);
            sim_run(s, 15 * DELTA);
            uint8_t exp[MAXN] = { 0 };
            exp[v] = 1;
            check_outcome(s, exp, 2 * DELTA + tau + bcast_time(n - 1, tau), NULL);
            assert_true(s->nd[v].fenced);
            assert_int_equal(phx_ft_hb_dead_count(s->nd[v].hb), 0);   /* blamed no one */
            uint64_t lat = s->nd[v].fenced_at - resume;
            if (lat > worst_fence)
                worst_fence = lat;
            assert_true(lat <= 2 * tau + 1);
            sim_free(s);
            runs++;

            /* short stop: 0.5 delta */
            s = sim_new(n, tau, 1900 + (uint64_t)(v * 2 + order), NULL);
            s->resume_msgs_first = order;
            schedule(s, t, ACT_PAUSE, v, 0);
            schedule(s, t + DELTA / 2, ACT_RESUME, v, 0);
            sim_run(s, 15 * DELTA);
            s->nd[v].crash_t = 0;
            uint8_t none[MAXN] = { 0 };
            check_outcome(s, none, 0, NULL);
            sim_free(s);
            runs++;
        }
    }
    printf("hb sim: pause/resume: %ld runs, fenced within %.2f tau of resuming\n", runs,
           (double)worst_fence / (double)tau);
}

/* TCP-reset hints: on a crashed emitter detection drops to about
 * delta/2; on a live one (connection re-established) nothing happens.
 * TCP reports the reset after the bytes sent before it, so the hint comes
 * after the last heartbeat in flight (tau after the crash). */
static void test_sim_hints(void **state)
{
    (void)state;
    uint64_t tau = DELTA / 20;
    const int n = 13;
    long runs = 0;
    for (int v = 0; v < n; v++) {
        struct sim *s = sim_new(n, tau, 3000 + (uint64_t)v, NULL);
        uint64_t t = 3 * DELTA + rnd_below(DELTA);
        int obs = (v + 1) % n;
        schedule(s, t, ACT_CRASH, v, 0);
        schedule(s, t + tau, ACT_HINT, obs, v);
        /* a spurious hint on a live emitter elsewhere */
        schedule(s, t, ACT_HINT, (v + 6) % n, (v + 5) % n);
        sim_run(s, 12 * DELTA);
        uint8_t exp[MAXN] = { 0 };
        exp[v] = 1;
        check_outcome(s, exp, tau + DELTA / 2 + bcast_time(n - 1, tau), NULL);
        sim_free(s);
        runs++;
    }
    printf("hb sim: suspect hints: %ld runs, detection <= tau + delta/2 + B\n", runs);
}

/* Random soak: bursts of up to floor(log2 n) - 1 crashes, the bursts spaced
 * by more than T(1), some pauses; everyone converges. */
static void test_sim_random_soak(void **state)
{
    (void)state;
    uint64_t tau = DELTA / 20;
    long runs = 0, killed = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        int n = seed % 3 == 0 ? 48 : (seed % 3 == 1 ? 32 : 21);
        int k = floor_log2(n);
        struct sim *s = sim_new(n, tau, 7000 + seed, NULL);
        uint8_t exp[MAXN] = { 0 };
        uint64_t t = 3 * DELTA;
        int alive = n;
        for (int burst = 0; burst < 4 && alive > 4; burst++) {
            int f = 1 + (int)rnd_below((uint64_t)(k - 1));
            for (int j = 0; j < f; j++) {
                int r;
                do
                    r = (int)rnd_below((uint64_t)n);
                while (exp[r]);
                exp[r] = 1;
                alive--;
                killed++;
                if (rnd_below(4) == 0) {   /* a long stop instead of a crash */
                    schedule(s, t + rnd_below(DELTA), ACT_PAUSE, r, 0);
                    schedule(s, t + 40 * DELTA, ACT_RESUME, r, 0);
                } else {
                    schedule(s, t + rnd_below(DELTA), ACT_CRASH, r, 0);
                }
            }
            t += 8 * DELTA;
        }
        sim_run(s, t + 60 * DELTA);
        check_outcome(s, exp, 0, NULL);
        for (int r = 0; r < n; r++)
            if (exp[r] && !s->nd[r].crashed)
                assert_true(s->nd[r].fenced);
        sim_free(s);
        runs++;
    }
    printf("hb sim: random soak: %ld runs, %ld failures, all survivors agree\n", runs, killed);
}

/* Past the broadcast's bound: n = 8, every failure set
 * of 1 to 7 ranks (a whole host of a 2-host layout, all but one), on the
 * identity ring and on the host-jumping ring of 2 hosts x 4, crashed
 * (0) all at once, (1) one first and the rest while its death is being
 * broadcast, (2) at seeded random times within 3 delta. Every survivor ends
 * with D == the failure set, learned once, and the live ring. Run with
 * the whole D in every broadcast (the default at this size) and with
 * compact broadcasts only. */
static void exhaustive_n8(int list_max)
{
    sim_list_max = list_max;
    const int n = 8;
    const uint64_t tau = DELTA / 20;
    uint32_t two_hosts[8];
    for (int r = 0; r < n; r++)
        two_hosts[r] = (uint32_t)(r / 4);
    long runs = 0, past_bound = 0;
    for (int layout = 0; layout < 2; layout++) {
        for (uint32_t mask = 1; mask < 255; mask++) {
            int f = __builtin_popcount(mask);
            for (int mode = 0; mode < 3; mode++) {
                uint64_t seed = 40000 + (uint64_t)layout * 10000 + mask * 3 + (uint64_t)mode;
                struct sim *s = sim_new(n, tau, seed, layout ? two_hosts : NULL);
                uint8_t exp[MAXN] = { 0 };
                uint64_t t = 3 * DELTA + rnd_below(DELTA);
                int first = __builtin_ctz(mask);
                for (int r = 0; r < n; r++) {
                    if (!(mask & (1u << r)))
                        continue;
                    exp[r] = 1;
                    if (mode == 0 || (mode == 1 && r == first))
                        schedule(s, t, ACT_CRASH, r, 0);
                    else if (mode == 2)
                        schedule(s, t + rnd_below(3 * DELTA), ACT_CRASH, r, 0);
                }
                if (mode == 1 && f > 1) {
                    s->trigger_rank = first;
                    s->trigger_mask = mask & ~(1u << first);
                    s->trigger_delay = rnd_below(tau);
                }
                sim_run(s, t + 60 * DELTA);
                check_outcome(s, exp, 0, NULL);
                sim_free(s);
                runs++;
                past_bound += f > floor_log2(n) - 1;
            }
        }
    }
    printf("hb sim: exhaustive n=8%s: %ld runs (%ld past the broadcast's bound), all survivors "
           "agree\n", list_max < 0 ? ", compact broadcasts" : "", runs, past_bound);
    sim_list_max = 0;
}

static void test_sim_exhaustive_n8(void **state)
{
    (void)state;
    exhaustive_n8(0);
    exhaustive_n8(-1);
}

int main(void)
{
    phx_log_set_level(PHX_LOG_ERROR);   /* fencing and stalls are expected here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t1_heartbeat_period),
        cmocka_unit_test(test_t2_t3_suspicion),
        cmocka_unit_test(test_t4_newobserver),
        cmocka_unit_test(test_t5_findemitter_exhaustive),
        cmocka_unit_test(test_fencing_paths),
        cmocka_unit_test(test_incarnation),
        cmocka_unit_test(test_view_preset),
        cmocka_unit_test(test_dead_order),
        cmocka_unit_test(test_suspect_hint),
        cmocka_unit_test(test_suspect_gone),
        cmocka_unit_test(test_suspect_gone_declares_at_once),
        cmocka_unit_test(test_dset_exchange),
        cmocka_unit_test(test_dead_list_widths),
        cmocka_unit_test(test_compact_bcast),
        cmocka_unit_test(test_stall_and_jitter),
        cmocka_unit_test(test_malformed_fuzz),
        cmocka_unit_test(test_ring_order),
        cmocka_unit_test(test_sim_no_false_suspicion),
        cmocka_unit_test(test_sim_single_failure),
        cmocka_unit_test(test_sim_consecutive_failures),
        cmocka_unit_test(test_sim_kill_during_propagation),
        cmocka_unit_test(test_sim_pause),
        cmocka_unit_test(test_sim_hints),
        cmocka_unit_test(test_sim_random_soak),
        cmocka_unit_test(test_sim_exhaustive_n8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

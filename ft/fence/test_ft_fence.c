/* ft/fence driven by hand, in virtual time: partitions at n = 2..8 (every
 * split, every silent/reached mix, exhaustively), the hold of silence-only
 * deaths and its 3 delta expiry, a newcomer releasing a hold, isolation
 * after a stall (a stalled node never fences itself merely for
 * hearing nothing), lost links, views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/fence/fence.h"

#define D 1000000000ull   /* delta: 1 s in ns */
#define T0 (1000 * D)     /* virtual clock start */
#define MAXN 4096

/* The transport's levels, as the machine samples them. */
typedef struct {
    int reached[MAXN], connected[MAXN];
} world_t;

static int w_reached(void *ctx, int r) { return ((world_t *)ctx)->reached[r]; }
static int w_connected(void *ctx, int r) { return ((world_t *)ctx)->connected[r]; }

static phx_ft_fence_t *mk(world_t *w, int n, int me)
{
    memset(w, 0, sizeof *w);
    for (int r = 0; r < n; r++)
        w->connected[r] = r != me;
    phx_ft_fence_cfg_t cfg = { .nranks = n, .rank = me, .delta_ns = D };
    phx_ft_fence_env_t env = { .ctx = w, .reached = w_reached, .connected = w_connected };
    phx_ft_fence_t *f;
    assert_int_equal(phx_ft_fence_create(&cfg, &env, &f), 0);
    phx_ft_fence_start(f);
    return f;
}

/* Drains what is due at now into got[] (ranks); returns the count. */
static int drain(phx_ft_fence_t *f, uint64_t now, int *got)
{
    phx_ft_fence_notice_t d;
    int k = 0;
    while (phx_ft_fence_next(f, now, &d))
        got[k++] = d.rank;
    return k;
}

static void test_create_args(void **s)
{
    (void)s;
    world_t *w = calloc(1, sizeof *w);
    phx_ft_fence_cfg_t cfg = { .nranks = 4, .rank = 4, .delta_ns = D };
    phx_ft_fence_env_t env = { .ctx = w, .reached = w_reached, .connected = w_connected };
    phx_ft_fence_t *f;
    assert_int_equal(phx_ft_fence_create(&cfg, &env, &f), PHX_EINVAL);
    cfg.rank = 0;
    env.reached = NULL;
    assert_int_equal(phx_ft_fence_create(&cfg, &env, &f), PHX_EINVAL);
    f = mk(w, 4, 0);
    assert_int_equal(phx_ft_fence_on_dead(f, 0, 0, T0, T0), PHX_EINVAL);   /* self */
    assert_int_equal(phx_ft_fence_on_dead(f, 4, 0, T0, T0), PHX_EINVAL);
    assert_int_equal(phx_ft_fence_deadline(f), UINT64_MAX);
    phx_ft_fence_destroy(f);
    free(w);
}

/* A death whose host answered is due at once; a silent one waits until
 * the episode has been quiet for 3 delta (due at last + 3 delta + 1). */
static void test_hold_expiry(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_t *f = mk(w, 5, 0);
    int got[8];
    w->reached[2] = 1;
    assert_int_equal(phx_ft_fence_on_dead(f, 1, 7, T0 - 5, T0), 0);   /* silent */
    assert_int_equal(phx_ft_fence_on_dead(f, 2, 3, T0, T0 + D), 0);   /* reached */
    assert_int_equal(phx_ft_fence_verdict(f, T0 + D, 0), PHX_FT_FENCE_GO_ON);
    /* Each notice goes out once for its connection to close, held or not. */
    phx_ft_fence_notice_t d;
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 1);
    assert_int_equal(d.rank, 1);
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 1);
    assert_int_equal(d.rank, 2);
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 0);
    assert_int_equal(drain(f, T0 + D, got), 1);
    assert_int_equal(got[0], 2);
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 0);
    /* The second death extended the episode: 3 delta from it. */
    assert_int_equal(phx_ft_fence_deadline(f), T0 + D + 3 * D + 1);
    assert_int_equal(drain(f, T0 + 4 * D, got), 0);   /* exactly 3 delta: still held */
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 4 * D, 0), PHX_FT_FENCE_GO_ON);
    assert_int_equal(phx_ft_fence_next(f, T0 + 4 * D + 1, &d), 1);
    assert_int_equal(d.rank, 1);
    assert_int_equal(d.inc, 7);
    assert_int_equal(d.when_ns, T0 - 5);
    assert_int_equal(d.decl_ns, T0);
    assert_int_equal(phx_ft_fence_next(f, T0 + 4 * D + 1, &d), 0);
    assert_int_equal(phx_ft_fence_deadline(f), UINT64_MAX);
    phx_ft_fence_destroy(f);
    free(w);
}

/* Deaths more than 3 delta apart are separate episodes: two single silent
 * deaths in a 3-node job never add up to a majority. */
static void test_episode_gap(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_t *f = mk(w, 3, 0);
    int got[4];
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 0), PHX_FT_FENCE_GO_ON);
    assert_int_equal(drain(f, T0 + 3 * D + 1, got), 1);
    phx_ft_fence_on_dead(f, 2, 0, T0 + 3 * D + 1, T0 + 3 * D + 1);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 3 * D + 1, 0), PHX_FT_FENCE_GO_ON);
    assert_int_equal(drain(f, T0 + 3 * D + 2, got), 0);
    assert_int_equal(drain(f, T0 + 6 * D + 2, got), 1);
    assert_int_equal(got[0], 2);
    phx_ft_fence_destroy(f);

    /* Within 3 delta of each other they are one episode: 2 silent > 1 live. */
    f = mk(w, 3, 0);
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 0), PHX_FT_FENCE_GO_ON);
    phx_ft_fence_on_dead(f, 2, 0, T0 + 3 * D, T0 + 3 * D);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 3 * D, 0), PHX_FT_FENCE_MINORITY);
    phx_ft_fence_info_t in;
    phx_ft_fence_get_info(f, &in);
    assert_int_equal(in.silent, 2);
    assert_int_equal(in.live, 1);
    assert_int_equal(drain(f, T0 + 10 * D, got), 0);   /* nothing acted on, ever */
    assert_int_equal(phx_ft_fence_deadline(f), UINT64_MAX);
    phx_ft_fence_destroy(f);
    free(w);
}

/* Every partition of n = 2..8 seen from one side: `me` and the members
 * not in S stay together, S falls silent (declared within one episode, in
 * a seeded order and spacing < 3 delta). Every mix of S's members whose
 * hosts answered (a process that ended) is tried. The rule: this side
 * leaves iff the silent members of S outnumber those alive here; before
 * that, a silent death is never acted on; a side that stays acts on every
 * death once the episode settles. So of the two sides of a real partition
 * (all silent), exactly one goes on, and both on an even split. */
static void test_splits_exhaustive(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    uint64_t seed = 88172645463325252ull;
    long runs = 0, fenced = 0;
    for (int n = 2; n <= 8; n++) {
        for (int me = 0; me < n; me++) {
            int np = n - 1, peers[8], pw = 1;
            for (int r = 0, k = 0; r < n; r++)
                if (r != me)
                    peers[k++] = r;
            for (int i = 0; i < np; i++)
                pw *= 3;
            /* each peer: 0 stays with us, 1 silent, 2 ended (reached) */
            for (int code = 1; code < pw; code++) {
                int state[8], order[8], ns = 0, nsil = 0, c = code;
                for (int i = 0; i < np; i++, c /= 3) {
                    state[i] = c % 3;
                    if (state[i])
                        order[ns++] = i;
                    nsil += state[i] == 1;
                }
                for (int i = ns - 1; i > 0; i--) {   /* seeded order */
                    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                    int j = (int)(seed % (uint64_t)(i + 1)), t = order[i];
                    order[i] = order[j], order[j] = t;
                }
                phx_ft_fence_t *f = mk(w, n, me);
                uint64_t now = T0;
                int verdict = 0, acted = 0, got[8];
                for (int k = 0; k < ns && !verdict; k++) {
                    int i = order[k], r = peers[i];
                    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                    now += seed % (3 * D);   /* < 3 delta after the previous */
                    w->reached[r] = state[i] == 2;
                    w->connected[r] = 0;
                    assert_int_equal(phx_ft_fence_on_dead(f, r, 0, now, now), 0);
                    verdict = phx_ft_fence_verdict(f, now, 0);
                    int m = drain(f, now, got);
                    for (int j = 0; j < m; j++)
                        assert_int_equal(w->reached[got[j]], 1);   /* silent ones wait */
                    acted += m;
                }
                int live = n - ns, leave = nsil > live;
                assert_int_equal(verdict, leave ? PHX_FT_FENCE_MINORITY : PHX_FT_FENCE_GO_ON);
                if (!leave) {
                    /* a later check in the episode agrees; then all are delivered */
                    assert_int_equal(phx_ft_fence_verdict(f, now + 3 * D, 0), PHX_FT_FENCE_GO_ON);
                    acted += drain(f, now + 3 * D + 1, got);
                    assert_int_equal(acted, ns);
                    assert_int_equal(phx_ft_fence_verdict(f, now + 3 * D + 1, 0), PHX_FT_FENCE_GO_ON);
                } else {
                    assert_int_equal(drain(f, now + 10 * D, got), 0);
                    fenced++;
                }
                runs++;
                phx_ft_fence_destroy(f);
            }
        }
    }
    /* A real partition (all silent) into sides A and B: A leaves iff
     * |B| > |A| (checked above per side), so for |A| != |B| exactly one
     * side goes on, and on an even split both do (a 2-host job must
     * survive one host's power loss; documented in README.md). */
    for (int n = 2; n <= 8; n++)
        for (int a = 1; a < n; a++) {
            int b = n - a, a_leaves = b > a, b_leaves = a > b;
            assert_int_equal(a_leaves + b_leaves, a == b ? 0 : 1);
        }
    free(w);
    print_message("%ld runs, %ld fenced\n", runs, fenced);
}

/* A newcomer in a dead rank's place shows its old process ended: the
 * held notice is due now, and the rank no longer counts as silent. */
static void test_newcomer_releases_hold(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_t *f = mk(w, 5, 0);
    int got[8];
    assert_int_equal(phx_ft_fence_on_peer_up(f, 3), 0);   /* not dead: nothing held */
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    phx_ft_fence_on_dead(f, 3, 0, T0, T0);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 0), PHX_FT_FENCE_GO_ON);
    assert_int_equal(drain(f, T0, got), 0);
    assert_int_equal(phx_ft_fence_on_peer_up(f, 3), 1);
    assert_int_equal(drain(f, T0 + 1, got), 1);
    assert_int_equal(got[0], 3);
    assert_int_equal(phx_ft_fence_on_peer_up(f, 3), 0);   /* already delivered */
    /* 1 still held; two more silent deaths: 1, 2, 4 silent would be 3 > 2,
     * but the newcomer's rank 3 counts as ended: 3 silent vs 1 live... */
    phx_ft_fence_on_dead(f, 2, 0, T0 + D, T0 + D);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + D, 0), PHX_FT_FENCE_GO_ON);   /* 2 <= 2 */
    assert_int_equal(drain(f, T0 + D, got), 0);
    assert_int_equal(drain(f, T0 + 4 * D + 1, got), 2);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 2);
    phx_ft_fence_destroy(f);

    /* The same deaths without the newcomer: 3 silent > 2 live. */
    f = mk(w, 5, 0);
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    phx_ft_fence_on_dead(f, 3, 0, T0, T0);
    phx_ft_fence_on_dead(f, 2, 0, T0 + D, T0 + D);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + D, 0), PHX_FT_FENCE_MINORITY);
    phx_ft_fence_destroy(f);
    free(w);
}

/* Isolation: only a node in doubt (stopped long enough to have
 * been declared, within the last 2 delta) reads "every live peer dropped
 * its connection" as being declared; hearing nothing is never evidence.
 * Every peer state, n = 2..8: dead (in D), dropped (closed, reported),
 * disconnected (closed, not yet reported), reported dropped but connected
 * again with no frame heard since, connected. */
static void test_isolation_exhaustive(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    long runs = 0;
    for (int n = 2; n <= 8; n++) {
        int me = n / 2, pw = 1;
        for (int i = 0; i < n - 1; i++)
            pw *= 5;
        for (int code = 0; code < pw; code++) {
            for (int doubt = 0; doubt <= 1; doubt++) {
                phx_ft_fence_t *f = mk(w, n, me);
                int c = code, alive = 0, up = 0;
                uint64_t now = T0;
                for (int r = 0; r < n; r++) {
                    if (r == me)
                        continue;
                    int st = c % 5;
                    c /= 5;
                    if (st == 0) {   /* dead, declared long ago (its host answered) */
                        w->reached[r] = 1;
                        w->connected[r] = 0;
                        phx_ft_fence_on_dead(f, r, 0, T0 - 10 * D, T0 - 10 * D);
                        continue;
                    }
                    alive++;
                    if (st == 1) {
                        phx_ft_fence_on_conn_closed(f, r);
                        w->connected[r] = 0;
                    } else if (st == 2) {
                        w->connected[r] = 0;
                    } else if (st == 3) {
                        phx_ft_fence_on_conn_closed(f, r);
                    } else {
                        up++;
                    }
                }
                int want = doubt && alive > 0 && up == 0 ? PHX_FT_FENCE_ISOLATED : PHX_FT_FENCE_GO_ON;
                assert_int_equal(phx_ft_fence_verdict(f, now, doubt), want);
                if (want) {
                    phx_ft_fence_info_t in;
                    phx_ft_fence_get_info(f, &in);
                    assert_int_equal(in.alive, alive);
                }
                phx_ft_fence_destroy(f);
                runs++;
            }
        }
    }
    free(w);
    print_message("%ld runs\n", runs);
}

/* The issue-9 scenario on 3 nodes, from the stalled node A: B was
 * SIGKILLed while A was stopped for 2 delta; A resumes in doubt. */
static void test_stalled_self(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    int got[4];
    /* A hears nothing at all for a long while (stalled), every connection
     * still open: no verdict, whatever the doubt. */
    phx_ft_fence_t *f = mk(w, 3, 0);
    for (uint64_t t = T0; t < T0 + 20 * D; t += D / 4)
        assert_int_equal(phx_ft_fence_verdict(f, t, 1), PHX_FT_FENCE_GO_ON);
    /* B's process ended (its host closed the connection): declared and
     * acted on at once; C still connected: A goes on. */
    w->reached[1] = 1;
    w->connected[1] = 0;
    phx_ft_fence_on_conn_closed(f, 1);
    phx_ft_fence_on_dead(f, 1, 0, T0 + 20 * D, T0 + 20 * D);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 20 * D, 1), PHX_FT_FENCE_GO_ON);
    assert_int_equal(drain(f, T0 + 20 * D, got), 1);
    /* C's connection drops, then a frame from C comes back (relinked):
     * the mark clears, no verdict. */
    phx_ft_fence_on_conn_closed(f, 2);
    phx_ft_fence_on_heard(f, 2);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 21 * D, 1), PHX_FT_FENCE_GO_ON);
    /* Not in doubt (merely slow): C dropping us is no evidence either. */
    phx_ft_fence_on_conn_closed(f, 2);
    w->connected[2] = 0;
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 22 * D, 0), PHX_FT_FENCE_GO_ON);
    /* In doubt, and the only live peer dropped us: we were declared. */
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 22 * D, 1), PHX_FT_FENCE_ISOLATED);
    phx_ft_fence_destroy(f);

    /* A in doubt whose peers both died by the protocol (alone): goes on. */
    f = mk(w, 3, 0);
    w->reached[1] = w->reached[2] = 1;
    w->connected[1] = w->connected[2] = 0;
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    phx_ft_fence_on_dead(f, 2, 0, T0, T0);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 1), PHX_FT_FENCE_GO_ON);
    assert_int_equal(drain(f, T0, got), 2);
    phx_ft_fence_destroy(f);
    free(w);
}

static void test_not_started_and_declared(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_cfg_t cfg = { .nranks = 3, .rank = 0, .delta_ns = D };
    phx_ft_fence_env_t env = { .ctx = w, .reached = w_reached, .connected = w_connected };
    phx_ft_fence_t *f;
    memset(w, 0, sizeof *w);
    assert_int_equal(phx_ft_fence_create(&cfg, &env, &f), 0);
    /* Before heartbeating starts, only the detector's verdict fences. */
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    phx_ft_fence_on_dead(f, 2, 0, T0, T0);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 1), PHX_FT_FENCE_GO_ON);
    phx_ft_fence_declared(f);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 0), PHX_FT_FENCE_DECLARED);
    phx_ft_fence_start(f);
    assert_int_equal(phx_ft_fence_verdict(f, T0, 1), PHX_FT_FENCE_DECLARED);   /* the first stays */
    int got[4];
    assert_int_equal(drain(f, T0 + 10 * D, got), 0);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 1, T0), PHX_FT_FENCE_LINK_NONE);
    assert_string_equal(phx_ft_fence_reason_name(PHX_FT_FENCE_MINORITY), "minority side of a partition");
    phx_ft_fence_destroy(f);
    free(w);
}

static void test_link_failed(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_cfg_t cfg = { .nranks = 4, .rank = 2, .delta_ns = D };
    phx_ft_fence_env_t env = { .ctx = w, .reached = w_reached, .connected = w_connected };
    phx_ft_fence_t *f;
    memset(w, 0, sizeof *w);
    assert_int_equal(phx_ft_fence_create(&cfg, &env, &f), 0);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 1, T0), PHX_FT_FENCE_LINK_WAIT);   /* rejoining */
    phx_ft_fence_start(f);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 3, T0), PHX_FT_FENCE_LINK_PEER);
    /* A notice delivered: for 2 delta the silent peer may be the next death. */
    w->reached[0] = 1;
    phx_ft_fence_on_dead(f, 0, 0, T0, T0);
    phx_ft_fence_notice_t d;
    assert_int_equal(phx_ft_fence_next(f, T0 + 5, &d), 1);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 0, T0 + 6), PHX_FT_FENCE_LINK_NONE);   /* dead */
    assert_int_equal(phx_ft_fence_on_link_failed(f, 1, T0 + 2 * D + 4), PHX_FT_FENCE_LINK_WAIT);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 2 * D + 4, 0), PHX_FT_FENCE_GO_ON);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 1, T0 + 2 * D + 5), PHX_FT_FENCE_LINK_SELF);
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 2 * D + 5, 0), PHX_FT_FENCE_LINK);
    assert_int_equal(phx_ft_fence_on_link_failed(f, 3, T0 + 3 * D), PHX_FT_FENCE_LINK_NONE);
    phx_ft_fence_destroy(f);
    free(w);
}

/* A rejoin view replaces D and clears the dropped marks. */
static void test_new_view(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    phx_ft_fence_t *f = mk(w, 4, 0);
    w->reached[1] = w->reached[2] = 1;
    phx_ft_fence_on_dead(f, 1, 0, T0, T0);
    phx_ft_fence_on_dead(f, 2, 0, T0, T0);
    int got[4];
    assert_int_equal(drain(f, T0, got), 2);
    phx_ft_fence_on_conn_closed(f, 3);
    w->connected[3] = 0;
    uint8_t dead[4] = { 1, 0, 1, 0 };   /* 1 rejoined; our own bit is ignored */
    phx_ft_fence_new_view(f, dead);
    assert_false(phx_ft_fence_is_dead(f, 0));
    assert_false(phx_ft_fence_is_dead(f, 1));
    assert_true(phx_ft_fence_is_dead(f, 2));
    /* 3 is connected again and its mark is gone: with 1 (rejoined) not
     * connected, 3 alone keeps us from isolation. */
    w->connected[3] = 1;
    w->connected[1] = 0;
    w->reached[1] = 0;
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 10 * D, 1), PHX_FT_FENCE_GO_ON);
    w->connected[3] = 0;
    assert_int_equal(phx_ft_fence_verdict(f, T0 + 10 * D, 1), PHX_FT_FENCE_ISOLATED);
    phx_ft_fence_destroy(f);
    free(w);
}

/* A queue of thousands: every death delivered once, in order, held ones
 * kept in order; the pass restarts on a new `now`. */
static void test_many(void **s)
{
    (void)s;
    world_t *w = malloc(sizeof *w);
    assert_non_null(w);
    int n = MAXN, *got = malloc(sizeof(int) * MAXN);
    phx_ft_fence_t *f = mk(w, n, 0);
    for (int r = 1; r < n; r++) {
        w->reached[r] = r % 3 != 0;   /* one in three silent */
        assert_int_equal(phx_ft_fence_on_dead(f, r, 0, T0, T0), 0);
    }
    /* Delivery alone (no verdict asked): as the runtime does, every
     * declared notice is told (its connection closed) before one is taken. */
    phx_ft_fence_notice_t d;
    int told = 0;
    while (phx_ft_fence_take_declared(f, &d))
        assert_int_equal(d.rank, ++told);
    assert_int_equal(told, n - 1);
    int k = drain(f, T0, got), prev = 0;
    assert_int_equal(k, n - 1 - (n - 1) / 3);
    for (int i = 0; i < k; i++) {
        assert_true(got[i] > prev && got[i] % 3 != 0);
        prev = got[i];
    }
    assert_int_equal(drain(f, T0 + 1, got), 0);
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 0);   /* held ones told once */
    k = drain(f, T0 + 3 * D + 1, got);
    assert_int_equal(k, (n - 1) / 3);
    for (int i = 0; i < k; i++)
        assert_int_equal(got[i], 3 * (i + 1));
    assert_int_equal(phx_ft_fence_take_declared(f, &d), 0);
    phx_ft_fence_destroy(f);
    free(got);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_hold_expiry),
        cmocka_unit_test(test_episode_gap),
        cmocka_unit_test(test_splits_exhaustive),
        cmocka_unit_test(test_newcomer_releases_hold),
        cmocka_unit_test(test_isolation_exhaustive),
        cmocka_unit_test(test_stalled_self),
        cmocka_unit_test(test_not_started_and_declared),
        cmocka_unit_test(test_link_failed),
        cmocka_unit_test(test_new_view),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

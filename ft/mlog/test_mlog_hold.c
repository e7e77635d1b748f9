/* ft/mlog/hold: random runs of batches of frames (some waiting for dets,
 * some only for order), det publications and acks, against a model:
 *   - order: frames leave exactly in the order they came;
 *   - soundness: a waiting frame leaves only once every det published
 *     before it was queued is acked (its own snapshot, earlier than or
 *     equal to its batch's), a frame that waits only for order never
 *     before the frames ahead of it;
 *   - liveness: once every det is acked, every frame leaves;
 *   - more batches than group slots (no acks for a long time) keep all
 *     three; drop (pop) empties the hold in order; a frame that waits
 *     for nothing is refused on an empty hold. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "ft/mlog/hold.h"
#include "ft/mlog/test_check.h"

enum { NQ = 3, MAXF = 20000 };

typedef struct run {
    uint64_t end[NQ], acked[NQ];        /* published, stored */
    uint64_t fsnap[MAXF][NQ];           /* each frame's own snapshot at its queueing */
    int waits[MAXF];
    int nput, nout;
    int asked;                          /* stored() calls */
} run_t;

static int stored(void *arg, const uint64_t *snap)
{
    run_t *r = arg;
    r->asked++;
    for (int i = 0; i < NQ; i++)
        if (r->acked[i] < snap[i])
            return 0;
    return 1;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void leave(run_t *r, void *tok)
{
    int f = (int)(intptr_t)tok - 1;   /* tokens are f + 1: never NULL */
    CHECK(f == r->nout);                /* order */
    if (r->waits[f])
        for (int i = 0; i < NQ; i++)
            CHECK(r->acked[i] >= r->fsnap[f][i]);   /* soundness */
    r->nout++;
}

static void release(phx_ml_hold_t *h, run_t *r)
{
    for (void *t; (t = phx_ml_hold_next(h, stored, r));)
        leave(r, t);
}

static void one_run(uint64_t seed, int batches, int ack_every, int quiet)
{
    run_t *r = calloc(1, sizeof *r);
    phx_ml_hold_t *h = phx_ml_hold_create(NQ);
    CHECK(r && h);
    if (!r || !h)
        return;
    uint64_t s = seed;
    for (int b = 0; b < batches && r->nput < MAXF - 16; b++) {
        /* Frames queued, each after some dets were published. */
        int k = 1 + (int)(rnd(&s) % 6);
        int first = r->nput;
        for (int j = 0; j < k; j++) {
            r->end[rnd(&s) % NQ] += rnd(&s) % 3;
            int f = r->nput++;
            memcpy(r->fsnap[f], r->end, sizeof r->end);
            r->waits[f] = rnd(&s) % 4 != 0;
        }
        /* The drain: its snapshot taken after all its frames were queued
         * (later dets may be published in between). */
        r->end[rnd(&s) % NQ] += rnd(&s) % 2;
        uint64_t bsnap[NQ];
        memcpy(bsnap, r->end, sizeof bsnap);
        for (int f = first; f < r->nput; f++) {
            int open = stored(r, bsnap);
            if (!phx_ml_hold_len(h) && (!r->waits[f] || open)) {
                leave(r, (void *)(intptr_t)(f + 1));   /* goes at once */
                continue;
            }
            CHECK(phx_ml_hold_put(h, (void *)(intptr_t)(f + 1), r->waits[f] ? bsnap : NULL) == 0);
        }
        phx_ml_hold_batch_end(h);
        /* Some acks come: a prefix of what was published. */
        if (b >= quiet && b % ack_every == 0)
            for (int i = 0; i < NQ; i++)
                if (r->end[i] > r->acked[i])
                    r->acked[i] += rnd(&s) % (r->end[i] - r->acked[i] + 1);
        release(h, r);
    }
    memcpy(r->acked, r->end, sizeof r->end);   /* everything stored */
    release(h, r);
    CHECK(phx_ml_hold_len(h) == 0);           /* liveness */
    CHECK(r->nout == r->nput);
    phx_ml_hold_destroy(h);
    free(r);
}

static void test_basics(void)
{
    phx_ml_hold_t *h = phx_ml_hold_create(NQ);
    CHECK(h);
    CHECK(!phx_ml_hold_create(0));
    int x;
    CHECK(phx_ml_hold_put(h, &x, NULL) == PHX_EINVAL);   /* nothing ahead of it */
    uint64_t snap[NQ] = { 1, 0, 2 };
    run_t *r = calloc(1, sizeof *r);
    CHECK(phx_ml_hold_put(h, (void *)1, snap) == 0);
    CHECK(phx_ml_hold_put(h, (void *)2, NULL) == 0);
    phx_ml_hold_batch_end(h);
    CHECK(!phx_ml_hold_next(h, stored, r));            /* nothing acked */
    r->acked[0] = 1;
    r->acked[2] = 2;
    CHECK(phx_ml_hold_next(h, stored, r) == (void *)1);
    CHECK(phx_ml_hold_next(h, stored, r) == (void *)2);
    CHECK(!phx_ml_hold_next(h, stored, r));
    /* Drop: every frame in order, whatever is stored. */
    snap[1] = 9;
    for (intptr_t i = 1; i <= 300; i++) {
        CHECK(phx_ml_hold_put(h, (void *)i, snap) == 0);
        if (i % 3 == 0)
            phx_ml_hold_batch_end(h);
    }
    CHECK(phx_ml_hold_len(h) == 300);
    for (intptr_t i = 1; i <= 300; i++)
        CHECK(phx_ml_hold_pop(h) == (void *)i);
    CHECK(!phx_ml_hold_pop(h));
    /* One stored() per group, not per frame. */
    r->asked = 0;
    snap[1] = 0;
    for (intptr_t i = 1; i <= 10; i++)
        CHECK(phx_ml_hold_put(h, (void *)i, snap) == 0);
    phx_ml_hold_batch_end(h);
    for (intptr_t i = 1; i <= 10; i++)
        CHECK(phx_ml_hold_next(h, stored, r) == (void *)i);
    CHECK(r->asked == 1);
    free(r);
    phx_ml_hold_destroy(h);
}

int main(void)
{
    test_basics();
    for (uint64_t seed = 1; seed <= 200; seed++)
        one_run(seed * 0x9e3779b97f4a7c15ULL, 300, 1 + (int)(seed % 5), 0);
    /* No acks for more batches than group slots (the newest group takes
     * the later batches in), then acks a little at a time: a merged group
     * that kept its first snapshot would let later frames go too soon. */
    for (uint64_t seed = 1; seed <= 20; seed++)
        one_run(seed * 0x2545f4914f6cdd1dULL, 6 * PHX_ML_HOLD_GROUPS, 1, 2 * PHX_ML_HOLD_GROUPS);
    if (!fails)
        printf("test_mlog_hold: all checks passed\n");
    return fails != 0;
}

/* The duplicate filter of mlog-fast (ft/mlog/dupf.c): keys
 * <sender, receiver, type, tag>, counts of a tag over senders, the window
 * contract, and a packed copy that drops exactly what the original would
 * (a restored task's view). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ft/mlog/dupf.h"
#include "base/phx_err.h"

#include "ft/mlog/test_check.h"

enum { GHOST = 1, RES = 2 };

static void keys(void)
{
    phx_dupf_t *f = phx_dupf_create();
    CHECK(f);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 0) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 0) == 0);      /* same key: duplicate */
    CHECK(phx_dupf_admit(f, 11, 20, GHOST, 0) == 1);      /* another sender */
    CHECK(phx_dupf_admit(f, 10, 21, GHOST, 0) == 1);      /* another receiver */
    CHECK(phx_dupf_admit(f, 10, 20, RES, 0) == 1);        /* another type */
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 1) == 1);      /* another tag */
    CHECK(phx_dupf_dups(f) == 1);
    /* Out of order within the window, then the gap filled. */
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 5) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 3) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 5) == 0);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 2) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 4) == 1);
    for (uint64_t t = 0; t <= 5; t++)
        CHECK(phx_dupf_admit(f, 10, 20, GHOST, t) == 0);   /* below the base now */
    /* Far ahead of the lowest missing tag (a checkpoint interval re-sent
     * at once), up to the bound. */
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 6 + 1000) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 6 + 1000) == 0);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 6 + PHX_DUPF_AHEAD - 1) == 1);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 6 + PHX_DUPF_AHEAD) == PHX_ERANGE);
    for (uint64_t t = 6; t < 6 + 1000; t++)
        CHECK(phx_dupf_admit(f, 10, 20, GHOST, t) == 1);
    for (uint64_t t = 0; t <= 6 + 1000; t++)
        CHECK(phx_dupf_admit(f, 10, 20, GHOST, t) == 0);
    CHECK(phx_dupf_admit(f, 10, 20, GHOST, 6 + 1001) == 1);
    phx_dupf_destroy(f);
}

static void counts(void)
{
    phx_dupf_t *f = phx_dupf_create();
    /* A block with 4 neighbours, waiting for 4 ghosts of iteration k;
     * neighbour 4 runs one iteration ahead. */
    CHECK(phx_dupf_admit(f, 4, 99, GHOST, 0) == 1);
    for (int it = 0; it < 200; it++) {
        for (uint64_t s = 1; s <= 3; s++) {
            CHECK(phx_dupf_count(f, 99, GHOST, (uint64_t)it) == (int)s);
            CHECK(phx_dupf_admit(f, s, 99, GHOST, (uint64_t)it) == 1);
        }
        CHECK(phx_dupf_count(f, 99, GHOST, (uint64_t)it) == 4);
        CHECK(phx_dupf_count(f, 99, GHOST, (uint64_t)it + 1) == 0);
        CHECK(phx_dupf_admit(f, 4, 99, GHOST, (uint64_t)it + 1) == 1);
        CHECK(phx_dupf_count(f, 99, GHOST, (uint64_t)it + 1) == 1);
        CHECK(phx_dupf_count(f, 99, RES, (uint64_t)it) == 0);
    }
    CHECK(phx_dupf_count(f, 99, GHOST, 7) == 4);
    phx_dupf_destroy(f);
}

/* A random run of 4 senders to 2 receivers, packed at a random point: the
 * copy and the original agree on every later key, re-sent or new. */
static void packed(unsigned seed)
{
    srand(seed);
    phx_dupf_t *f = phx_dupf_create(), *g = phx_dupf_create();
    uint64_t next[4][2] = { { 0 } };
    int cut = rand() % 300;
    for (int step = 0; step < 600; step++) {
        int s = rand() % 4, r = rand() % 2;
        uint64_t tag = next[s][r]++;
        CHECK(phx_dupf_admit(f, (uint64_t)s + 1, (uint64_t)r + 100, GHOST, tag) == 1);
        if (step == cut) {
            uint8_t buf[4096];
            long k = phx_dupf_pack(f, buf, sizeof buf);
            CHECK(k == (long)phx_dupf_packed_size(f));
            CHECK(phx_dupf_pack(f, buf, (size_t)k - 1) == PHX_ENOSPC);
            for (long t = 0; t < k; t++)   /* every truncation refused, g left as it was */
                CHECK(phx_dupf_unpack(g, buf, (size_t)t) == PHX_EPROTO);
            CHECK(phx_dupf_count(g, 100, GHOST, 0) == 0);
            CHECK(phx_dupf_unpack(g, buf, (size_t)k) == 0);
            /* After the restore, the senders re-send what they logged. */
            for (int x = 0; x < 4; x++)
                for (int y = 0; y < 2; y++)
                    for (uint64_t t = 0; t < next[x][y]; t++)
                        CHECK(phx_dupf_admit(g, (uint64_t)x + 1, (uint64_t)y + 100, GHOST, t) == 0);
        } else if (step > cut)
            CHECK(phx_dupf_admit(g, (uint64_t)s + 1, (uint64_t)r + 100, GHOST, tag) == 1);
    }
    for (int x = 0; x < 4; x++)
        for (int y = 0; y < 2; y++)
            CHECK(phx_dupf_count(f, (uint64_t)y + 100, GHOST, next[x][y] - 1) ==
                  phx_dupf_count(g, (uint64_t)y + 100, GHOST, next[x][y] - 1));
    phx_dupf_destroy(f);
    phx_dupf_destroy(g);
}

int main(void)
{
    keys();
    counts();
    for (unsigned s = 1; s <= 20; s++)
        packed(s);
    if (fails) {
        fprintf(stderr, "test_mlog_dupf: %d checks failed\n", fails);
        return 1;
    }
    printf("test_mlog_dupf: ok\n");
    return 0;
}

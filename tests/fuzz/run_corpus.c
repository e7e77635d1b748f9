/* Plain driver for the fuzz entry point, so CI exercises it without clang or
 * libFuzzer: 200k seeded inputs (random bytes, and valid frame streams with
 * structure-aware mutations), then any files named on the command line.
 * Usage: fuzz_run_corpus [-n COUNT] [-s SEED] [-o DIR] [FILE...]
 * -o DIR writes 64 valid (unmutated) streams there as a libFuzzer seed corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/fuzz/corpus.h"

#include "net/auth.h"
#include "net/frame.h"


static uint64_t rs;
static uint64_t rnd(void) { return phx_fz_rnd(&rs); }

static const uint8_t types[] = { PHX_FT_HELLO, PHX_FT_AUTH, PHX_FT_AUTH_OK, PHX_FT_ACK, PHX_FT_APP, PHX_FT_SPAWN,
                                 PHX_FT_CTRL, PHX_FT_HB, PHX_FT_BCAST, PHX_FT_ERA, PHX_FT_TD, PHX_FT_BATCH };

/* A BATCH payload of 2-5 entries, as a sender builds one; its length (or
 * 0 when cap is too small). */
static uint32_t gen_batch(uint8_t *p, size_t cap)
{
    size_t n = 0;
    int k = 2 + (int)(rnd() % 4);
    for (int i = 0; i < k; i++) {
        phx_frame_hdr_t e = { 0 };
        e.type = rnd() % 2 ? PHX_FT_APP : PHX_FT_SPAWN;
        e.tag = (uint32_t)rnd();
        e.len = (uint32_t)(rnd() % 24);
        e.src = rnd();
        e.dst = rnd();
        e.ssn = rnd() % 100;
        if (n + PHX_BATCH_SUB + e.len > cap)
            return i >= 2 ? (uint32_t)n : 0;
        phx_batch_put(p + n, &e);
        for (uint32_t b = 0; b < e.len; b++)
            p[n + PHX_BATCH_SUB + b] = (uint8_t)rnd();
        n += PHX_BATCH_SUB + e.len;
    }
    return (uint32_t)n;
}

/* Builds [ctl][frame]...; returns the length. */
static size_t gen_valid(uint8_t *b, size_t cap)
{
    size_t n = 0;
    b[n++] = (uint8_t)rnd();
    int frames = 1 + (int)(rnd() % 6);
    uint64_t lseq = 0;   /* mostly in order, sometimes repeated or skipping */
    for (int i = 0; i < frames; i++) {
        phx_frame_hdr_t h = { 0 };
        h.type = types[rnd() % sizeof types];
        uint32_t len = h.type == PHX_FT_HELLO ? PHX_AUTH_HELLO_LEN
                     : h.type == PHX_FT_AUTH  ? PHX_AUTH_MAC_LEN : (uint32_t)(rnd() % 120);
        if (rnd() % 8 == 0)
            len = (uint32_t)(rnd() % 64);
        if (n + PHX_FRAME_HDR + len > cap)
            break;
        h.flags = (uint16_t)(rnd() & 1);
        h.len = len;
        h.src = rnd() % 4; h.dst = rnd() % 4; h.ssn = (uint64_t)i;
        h.inc = 1; h.tag = (uint32_t)rnd();
        if (h.type == PHX_FT_ACK) {
            h.len = len = rnd() % 8 ? 0 : len;
            h.lack = rnd() % 4;
        } else if (h.type != PHX_FT_HELLO && h.type != PHX_FT_AUTH && h.type != PHX_FT_AUTH_OK) {
            uint64_t r = rnd() % 16;
            h.lseq = r == 0 ? lseq : r == 1 ? lseq + 2 : r == 2 ? 0 : lseq + 1;
            if (h.lseq > lseq)
                lseq = h.lseq;
            h.lack = rnd() % 8 ? 0 : rnd() % 3;
        }
        uint8_t *p = b + n + PHX_FRAME_HDR;
        for (uint32_t k = 0; k < len; k++) p[k] = (uint8_t)rnd();
        if (h.type == PHX_FT_BATCH && rnd() % 4) {   /* mostly well-formed entries */
            h.len = len = gen_batch(p, cap - n - PHX_FRAME_HDR);
        }
        if (h.type == PHX_FT_HELLO && rnd() % 2) {   /* plausible HELLO: job 1 */
            phx_put_le32(p, (uint32_t)(rnd() % 3));
            phx_put_le64(p + 8, 1);
        }
        phx_frame_encode(b + n, &h, p);
        n += PHX_FRAME_HDR + len;
    }
    return n;
}

static void mutate(uint8_t *b, size_t *n, size_t cap)
{
    int k = (int)(rnd() % 4);
    for (int i = 0; i < k && *n > 1; i++) {
        size_t at = 1 + rnd() % (*n - 1);
        switch (rnd() % 6) {
        case 0: b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: b[at] = (uint8_t)rnd(); break;
        case 2: *n = at; break;                                   /* truncate */
        case 3: if (*n + 1 <= cap) { memmove(b + at + 1, b + at, *n - at); b[at] = (uint8_t)rnd(); (*n)++; } break;
        case 4: memmove(b + at, b + at + 1, *n - at - 1); (*n)--; break;
        case 5: if (at + 12 <= *n) phx_put_le32(b + at + 8, (uint32_t)rnd() >> (rnd() % 32)); break;
        }
    }
}

static int emit_seeds(const char *dir)
{
    static uint8_t buf[2048];
    for (int i = 0; i < 64; i++) {
        size_t n = gen_valid(buf, sizeof buf);
        buf[0] |= 1;   /* keep CRC repair on so mutations stay interesting */
        if (phx_fz_write_seed(dir, i, buf, n))
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long count = 200000;
    uint64_t seed = 0x5048584cull;
    const char *seed_dir = NULL;
    int i = 1, files = 0, bad = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            seed_dir = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            count = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else {
            bad |= phx_fz_run_file(argv[i]) != 0;
            files++;
        }
    }
    rs = seed;
    if (seed_dir)
        return emit_seeds(seed_dir) ? 1 : 0;
    static uint8_t buf[2048];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long kinds[3] = { 0 };
    for (long it = 0; it < count; it++) {
        size_t n;
        int kind = (int)(rnd() % 8);
        if (kind == 0) {                     /* raw noise */
            n = rnd() % 300;
            for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rnd();
            kinds[0]++;
        } else {
            n = gen_valid(buf, sizeof buf);
            if (kind >= 3) {
                mutate(buf, &n, sizeof buf);
                kinds[2]++;
            } else {
                kinds[1]++;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fuzz corpus: %ld generated inputs (%ld noise, %ld valid, %ld mutated) + %d files, "
           "%.2f s, seed 0x%llx\n", count, kinds[0], kinds[1], kinds[2], files, s,
           (unsigned long long)seed);
    return bad;
}

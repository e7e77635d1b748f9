/* Plain driver for fuzz_msg, so every decoder past the frame runs on each
 * test run without clang or libFuzzer: each seed (fuzz_msg.h: made by the
 * real encoders) as is, then COUNT mutations of them and of random bytes,
 * then any files named on the command line.
 * Usage: fuzz_run_msg_corpus [-n COUNT] [-s SEED] [-o DIR] [FILE...]
 * -o DIR writes the seeds there as a libFuzzer corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/fuzz/corpus.h"

#include "tests/fuzz/fuzz_msg.h"


typedef struct seed {
    uint8_t *b;
    size_t n;
} seed_t;
static seed_t seeds[1024];
static int nseeds;

static void keep(void *ctx, const uint8_t *buf, size_t len)
{
    (void)ctx;
    if (nseeds == (int)(sizeof seeds / sizeof seeds[0]))
        return;
    uint8_t *b = malloc(len);
    if (!b)
        abort();
    memcpy(b, buf, len);
    seeds[nseeds++] = (seed_t){ b, len };
}

static uint64_t rs;
static uint64_t rnd(void) { return phx_fz_rnd(&rs); }

/* Byte flips, stores, truncation, insertion, deletion and 32-bit field
 * rewrites past the two control bytes; sometimes another param. */
static void mutate(uint8_t *b, size_t *n, size_t cap)
{
    int k = 1 + (int)(rnd() % 4);
    if (rnd() % 4 == 0)
        b[1] = (uint8_t)rnd();
    for (int i = 0; i < k && *n > 2; i++) {
        size_t at = 2 + rnd() % (*n - 2);
        switch (rnd() % 6) {
        case 0: b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: b[at] = (uint8_t)rnd(); break;
        case 2: *n = at; break;
        case 3: if (*n + 1 <= cap) { memmove(b + at + 1, b + at, *n - at); b[at] = (uint8_t)rnd(); (*n)++; } break;
        case 4: memmove(b + at, b + at + 1, *n - at - 1); (*n)--; break;
        case 5: if (at + 4 <= *n) { uint32_t v = (uint32_t)rnd() >> (rnd() % 32); memcpy(b + at, &v, 4); } break;
        }
    }
}

static int write_seeds(const char *dir)
{
    for (int i = 0; i < nseeds; i++)
        if (phx_fz_write_seed(dir, i, seeds[i].b, seeds[i].n))
            return -1;
    return 0;
}

int main(int argc, char **argv)
{
    long count = 200000;
    uint64_t seed = 0x5048584dull;
    const char *dir = NULL;
    int files = 0, bad = 0;
    phx_fuzz_msg_seeds(keep, NULL);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            count = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else {
            bad |= phx_fz_run_file(argv[i]) != 0;
            files++;
        }
    }
    if (dir)
        return write_seeds(dir) ? 1 : 0;
    long per[FZ_NTARGETS] = { 0 };
    for (int i = 0; i < nseeds; i++) {
        per[seeds[i].b[0] % FZ_NTARGETS]++;
        LLVMFuzzerTestOneInput(seeds[i].b, seeds[i].n);
    }
    for (int t = 0; t < FZ_NTARGETS; t++)
        if (!per[t]) {
            fprintf(stderr, "fuzz_run_msg_corpus: no seed for target %d\n", t);
            bad = 1;
        }
    rs = seed;
    static uint8_t buf[8192];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long it = 0; it < count && nseeds; it++) {
        size_t n;
        if (rnd() % 16 == 0) {   /* noise, any target */
            n = 2 + rnd() % 200;
            for (size_t k = 0; k < n; k++)
                buf[k] = (uint8_t)rnd();
        } else {
            const seed_t *s = &seeds[rnd() % (uint64_t)nseeds];
            n = s->n < sizeof buf ? s->n : sizeof buf;
            memcpy(buf, s->b, n);
            mutate(buf, &n, sizeof buf);
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fuzz msg corpus: %d seeds (era %ld, hb %ld, td %ld, ckctl %ld, mlog %ld, blob %ld, disk %ld, core %ld, glb %ld), "
           "%ld mutated inputs + %d files, %.2f s, seed 0x%llx\n",
           nseeds, per[FZ_ERA], per[FZ_HB], per[FZ_TD], per[FZ_CKCTL], per[FZ_MLOG], per[FZ_BLOB], per[FZ_DISK],
           per[FZ_CORE], per[FZ_GLB], count, files, secs, (unsigned long long)seed);
    return bad;
}

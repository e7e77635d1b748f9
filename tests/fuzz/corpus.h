/* What the two plain fuzz drivers (run_corpus.c, run_msg_corpus.c) share:
 * their random numbers, writing one seed file, replaying one file. Each
 * driver links one LLVMFuzzerTestOneInput. Single-threaded. */
#ifndef PHX_FUZZ_CORPUS_H
#define PHX_FUZZ_CORPUS_H

#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* splitmix64: the drivers' inputs follow from their -s SEED alone. */
static inline uint64_t phx_fz_rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Writes buf as DIR/seed-NNN (libFuzzer corpus); 0, or -1 after perror. */
static inline int phx_fz_write_seed(const char *dir, int i, const uint8_t *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%03d", dir, i);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n) {
        perror(path);
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* Feeds the file's first MiB to the entry point; 0, or -1 after perror. */
static inline int phx_fz_run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

#endif

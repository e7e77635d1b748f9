#include "crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>
#include <string.h>

/* Small buffers (frame headers, short payloads: several per message) go
 * through the CPU's crc32 instruction inline: ISA-L's folding kernel is the
 * fastest for long runs but its set-up costs more than a 64-byte header
 * takes by instruction (about a quarter of the CPU of a small-message
 * stream went to it). Same checksum either way. */
#define SMALL_MAX 256

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *b, size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    if (n >= 4) {
        uint32_t v;
        memcpy(&v, b, 4);
        c = _mm_crc32_u32(c, v);
        b += 4;
        n -= 4;
    }
    for (; n; n--, b++)
        c = _mm_crc32_u8(c, *b);
    return c;
}

static int have_hw(void)
{
    static int have = -1;   /* benign race: every thread computes the same */
    if (have < 0)
        have = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return have;
}
#else
static uint32_t crc_hw(uint32_t c, const uint8_t *b, size_t n) { (void)b; (void)n; return c; }
static int have_hw(void) { return 0; }
#endif

/* ISA-L picks its fastest kernel for this CPU (PCLMUL folding, SSE4.2 crc32,
 * or tables) and neither pre- nor post-inverts: the convention's inversions
 * are applied here, so calls chain. Its length is an int: feed big buffers
 * in pieces. */
uint32_t phx_crc32c(uint32_t crc, const void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;    /* ISA-L takes a non-const pointer, reads only */
    uint32_t c = ~crc;
    if (n <= SMALL_MAX && have_hw())
        return ~crc_hw(c, b, n);
    while (n) {
        int k = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        c = crc32_iscsi(b, k, c);
        b += k;
        n -= (size_t)k;
    }
    return ~c;
}

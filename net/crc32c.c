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

/* Small enough to stay in L1 between the checksum's read and the copy's. */
#define COPY_CHUNK (16u << 10)

uint32_t phx_crc32c_copy(void *dst, const void *src, size_t n, uint32_t crc)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (n) {
        size_t k = n < COPY_CHUNK ? n : COPY_CHUNK;
        crc = phx_crc32c(crc, s, k);
        memcpy(d, s, k);
        d += k;
        s += k;
        n -= k;
    }
    return crc;
}

/* Polynomials mod the (reflected) CRC32C polynomial, bit 31 the x^0 term:
 * the arithmetic zlib's crc32_combine uses. */
#define POLY 0x82F63B78u

static uint32_t mulmod(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(2^k) mod POLY, k = 0..31 (each the square of the one before; the
 * cycle closes: entry 31 equals entry 0). tests/unit/test_frame.c checks
 * them through phx_crc32c_combine. */
static const uint32_t x2n[32] = {
    0x40000000, 0x20000000, 0x08000000, 0x00800000, 0x00008000, 0x82f63b78,
    0x6ea2d55c, 0x18b8ea18, 0x510ac59a, 0xb82be955, 0xb8fdb1e7, 0x88e56f72,
    0x74c360a4, 0xe4172b16, 0x0d65762a, 0x35d73a62, 0x28461564, 0xbf455269,
    0xe2ea32dc, 0xfe7740e6, 0xf946610b, 0x3c204f8f, 0x538586e3, 0x59726915,
    0x734d5309, 0xbc1ac763, 0x7d0722cc, 0xd289cabe, 0xe94ca9bc, 0x05b74f3f,
    0xa51e1f42, 0x40000000,
};

uint32_t phx_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
{
    /* crc(a||b) = crc_a * x^(8 len_b) + crc_b: the inversions at either end
     * cancel between the two sums. */
    uint32_t p = 1u << 31;   /* x^0 */
    for (unsigned k = 3; len_b; len_b >>= 1, k++)
        if (len_b & 1)
            p = mulmod(x2n[k & 31], p);
    return mulmod(p, crc_a) ^ crc_b;
}

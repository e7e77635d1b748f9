#include "crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define POLY 0x82F63B78u

/* Slicing-by-8: tbl[k][b] is the CRC of byte b followed by k zero bytes, so
 * eight table lookups retire eight input bytes per iteration. */
static uint32_t tbl[8][256];
static pthread_once_t tbl_once = PTHREAD_ONCE_INIT;

static void tbl_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        tbl[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            tbl[k][b] = (tbl[k - 1][b] >> 8) ^ tbl[0][tbl[k - 1][b] & 0xff];
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);   /* unaligned-safe; compiles to one load */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

uint32_t phx_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&tbl_once, tbl_init);
    const uint8_t *b = p;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w = load_le64(b) ^ c;
        c = tbl[7][w & 0xff] ^ tbl[6][(w >> 8) & 0xff] ^
            tbl[5][(w >> 16) & 0xff] ^ tbl[4][(w >> 24) & 0xff] ^
            tbl[3][(w >> 32) & 0xff] ^ tbl[2][(w >> 40) & 0xff] ^
            tbl[1][(w >> 48) & 0xff] ^ tbl[0][w >> 56];
    }
    while (n--)
        c = (c >> 8) ^ tbl[0][(c ^ *b++) & 0xff];
    return ~c;
}

/* a * b modulo the CRC polynomial, bit-reflected (x^0 is bit 31), as in
 * zlib's crc32_combine: a register shifted over n zero bytes is
 * mulmod(x^(8n), register). */
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
        b = (b >> 1) ^ (POLY & (0u - (b & 1)));
    }
    return p;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* Large buffers run three independent crc32 chains over adjacent blocks of
 * STRIDE bytes: the instruction's 3-cycle latency otherwise caps one chain
 * at a third of its throughput. The chains are joined by shifting over
 * STRIDE zero bytes (two mulmod per 3 * STRIDE bytes). */
#define STRIDE 2048
static uint32_t x8stride;   /* x^(8 * STRIDE) mod P */
static pthread_once_t stride_once = PTHREAD_ONCE_INIT;

static void stride_init(void)
{
    uint32_t p = 1u << 30;   /* x^1 */
    for (unsigned bits = 8 * STRIDE; bits > 1; bits >>= 1)   /* STRIDE is a power of 2 */
        p = mulmod(p, p);
    x8stride = p;
}

__attribute__((target("sse4.2")))
uint32_t phx_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t c = ~crc;
    if (n >= 3 * STRIDE) {
        pthread_once(&stride_once, stride_init);
        for (; n >= 3 * STRIDE; n -= 3 * STRIDE, b += 3 * STRIDE) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < STRIDE; i += 8) {
                c = _mm_crc32_u64(c, load_le64(b + i));
                c1 = _mm_crc32_u64(c1, load_le64(b + STRIDE + i));
                c2 = _mm_crc32_u64(c2, load_le64(b + 2 * STRIDE + i));
            }
            c = mulmod(x8stride, mulmod(x8stride, (uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        }
    }
    /* Frames are mostly small (64-byte header + short payload): a plain
     * 8-byte loop for those and the tail. */
    for (; n >= 8; n -= 8, b += 8)
        c = _mm_crc32_u64(c, load_le64(b));
    uint32_t c32 = (uint32_t)c;
    if (n >= 4) {
        uint32_t w;
        memcpy(&w, b, 4);
        c32 = _mm_crc32_u32(c32, w);
        b += 4;
        n -= 4;
    }
    while (n--)
        c32 = _mm_crc32_u8(c32, *b++);
    return ~c32;
}

int phx_crc32c_hw_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}
#else
uint32_t phx_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
    return phx_crc32c_sw(crc, p, n);
}

int phx_crc32c_hw_available(void) { return 0; }
#endif

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static uint32_t crc_resolve(uint32_t crc, const void *p, size_t n);
/* Both candidates are idempotent to pick, so concurrent first calls may race
 * to store the same value; relaxed ordering is enough. */
static _Atomic(crc_fn) crc_impl = crc_resolve;

static uint32_t crc_resolve(uint32_t crc, const void *p, size_t n)
{
    crc_fn f = phx_crc32c_hw_available() ? phx_crc32c_hw : phx_crc32c_sw;
    atomic_store_explicit(&crc_impl, f, memory_order_relaxed);
    return f(crc, p, n);
}

uint32_t phx_crc32c(uint32_t crc, const void *p, size_t n)
{
    return atomic_load_explicit(&crc_impl, memory_order_relaxed)(crc, p, n);
}

/* Frame codec and CRC32C: known vectors, agreement with a bitwise reference, round trips, every
 * corruption class, and streaming decode across random split points. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>

#include "base/phx_err.h"
#include "net/crc32c.h"
#include "net/frame.h"

static uint64_t rng_state;
static uint64_t rnd(void)   /* splitmix64: deterministic given the seed */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static void fill(uint8_t *p, size_t n) { for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd(); }

static const unsigned types[] = { PHX_FT_HELLO, PHX_FT_AUTH, PHX_FT_AUTH_OK, PHX_FT_ACK, PHX_FT_APP, PHX_FT_SPAWN,
                                  PHX_FT_CTRL, PHX_FT_HB, PHX_FT_BCAST, PHX_FT_ERA, PHX_FT_TD, PHX_FT_BATCH };
#define NTYPES (sizeof types / sizeof types[0])

/* ---- CRC32C ---------------------------------------------------------- */

/* Bit-at-a-time reference, same convention as phx_crc32c. */
static uint32_t ref_crc32c(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    crc = ~crc;
    while (n--) {
        crc ^= *b++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void test_crc_vectors(void **st)
{
    (void)st;
    uint8_t b[32];
    int n = 0;
    assert_int_equal(phx_crc32c(0, "123456789", 9), 0xE3069283u), n++;
    assert_int_equal(ref_crc32c(0, "123456789", 9), 0xE3069283u), n++;
    assert_int_equal(phx_crc32c(0, "", 0), 0u), n++;
    /* RFC 3720 B.4 vectors */
    memset(b, 0, 32);
    assert_int_equal(phx_crc32c(0, b, 32), 0x8A9136AAu), n++;
    memset(b, 0xff, 32);
    assert_int_equal(phx_crc32c(0, b, 32), 0x62A8AB43u), n++;
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    assert_int_equal(phx_crc32c(0, b, 32), 0x46DD794Eu), n++;
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    assert_int_equal(phx_crc32c(0, b, 32), 0x113FDB5Cu), n++;
    printf("crc vectors: %d checks\n", n);
}

static void test_crc_ref_chain(void **st)
{
    (void)st;
    rng_state = 42;
    enum { MAX = 1100 };
    static uint8_t buf[MAX + 8];
    int n = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = iter < 300 ? (size_t)iter : (size_t)(rnd() % MAX);
        size_t off = rnd() % 8;   /* exercise unaligned starts */
        fill(buf + off, len);
        uint32_t seed = (iter & 1) ? (uint32_t)rnd() : 0;
        uint32_t s = ref_crc32c(seed, buf + off, len);
        assert_int_equal(phx_crc32c(seed, buf + off, len), s), n++;
        size_t cut = len ? rnd() % (len + 1) : 0;
        uint32_t c = phx_crc32c(seed, buf + off, cut);
        assert_int_equal(phx_crc32c(c, buf + off + cut, len - cut), s), n++;
    }
    /* long buffers: the library's folding kernels take over past a few KiB */
    static uint8_t big[5 * 6144 + 64];
    for (int iter = 0; iter < 40; iter++) {
        size_t len = iter < 8 ? 6144 * (size_t)(iter / 2) + (iter & 1) * 7 : rnd() % (sizeof big - 8);
        size_t off = rnd() % 8;
        fill(big + off, len);
        uint32_t seed = (uint32_t)rnd();
        uint32_t s = ref_crc32c(seed, big + off, len);
        assert_int_equal(phx_crc32c(seed, big + off, len), s), n++;
    }
    printf("crc ref/chain: %d checks\n", n);
}

/* phx_crc32c_copy copies exactly n bytes (not one more) and sums them;
 * phx_crc32c_combine joins two sums as phx_crc32c over both would. Lengths
 * cross the copy's 16 KiB chunks and the combine's bits up to 2^17. */
static void test_crc_copy_combine(void **st)
{
    (void)st;
    rng_state = 7;
    enum { MAX = 3 * 16384 + 100 };
    static uint8_t src[MAX + 8], dst[MAX + 16];
    int n = 0;
    size_t lens[] = { 0, 1, 7, 8, 63, 64, 255, 256, 257, 16383, 16384, 16385, 32768, 3 * 16384 + 99 };
    for (size_t i = 0; i < sizeof lens / sizeof *lens + 60; i++) {
        size_t len = i < sizeof lens / sizeof *lens ? lens[i] : rnd() % MAX;
        size_t off = rnd() % 8;
        fill(src + off, len);
        memset(dst, 0xA5, sizeof dst);
        uint32_t seed = (i & 1) ? (uint32_t)rnd() : 0;
        assert_int_equal(phx_crc32c_copy(dst + 4, src + off, len, seed), ref_crc32c(seed, src + off, len)), n++;
        assert_memory_equal(dst + 4, src + off, len), n++;
        assert_int_equal(dst[3], 0xA5), n++;
        assert_int_equal(dst[4 + len], 0xA5), n++;
        size_t cut = len ? rnd() % (len + 1) : 0;
        uint32_t a = phx_crc32c(0, src + off, cut), b = phx_crc32c(0, src + off + cut, len - cut);
        assert_int_equal(phx_crc32c_combine(a, b, len - cut), phx_crc32c(0, src + off, len)), n++;
    }
    /* every power of two up to 2^17 and its neighbours as the second part */
    static uint8_t big[(1u << 17) + 2];
    fill(big, sizeof big);
    for (size_t bit = 0; bit <= 17; bit++)
        for (size_t d = 0; d < 3; d++) {
            size_t lb = (1u << bit) + d - (bit ? 1 : 0);
            if (lb > sizeof big - 1)
                continue;
            uint32_t a = phx_crc32c(0, big, 1), b = phx_crc32c(0, big + 1, lb);
            assert_int_equal(phx_crc32c_combine(a, b, lb), phx_crc32c(0, big, 1 + lb)), n++;
        }
    printf("crc copy/combine: %d checks\n", n);
}

/* Runs first in the process so the library's lazy kernel pick races for real. */
static void *crc_thread(void *arg)
{
    uint8_t b[200];
    for (int i = 0; i < 200; i++) b[i] = (uint8_t)(i * 7 + (int)(intptr_t)arg);
    uint32_t want = ref_crc32c(0, b, sizeof b);
    for (int i = 0; i < 2000; i++)
        if (phx_crc32c(0, b, sizeof b) != want)
            return (void *)1;
    return NULL;
}

static void test_crc_threads(void **st)
{
    (void)st;
    pthread_t t[4];
    for (intptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, crc_thread, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
    printf("crc threads: 4 x 2000 concurrent checks\n");
}

/* ---- frame helpers ---------------------------------------------------- */

static size_t mk_frame(uint8_t *out, phx_frame_hdr_t *h, size_t len)
{
    memset(h, 0, sizeof *h);
    h->type = (uint8_t)types[rnd() % NTYPES];
    h->flags = (uint16_t)(rnd() & PHX_FRAME_F_LAST_IN_BATCH);
    h->len = (uint32_t)len;
    h->src = rnd(); h->dst = rnd(); h->ssn = rnd();
    h->inc = (uint32_t)rnd(); h->tag = (uint32_t)rnd();
    h->lseq = rnd(); h->lack = rnd();
    fill(out + PHX_FRAME_HDR, len);
    phx_frame_encode(out, h, out + PHX_FRAME_HDR);
    return PHX_FRAME_HDR + len;
}

static void assert_hdr_eq(const phx_frame_hdr_t *a, const phx_frame_hdr_t *b)
{
    assert_int_equal(a->magic, b->magic);
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->len, b->len);
    assert_int_equal(a->crc, b->crc);
    assert_true(a->src == b->src && a->dst == b->dst && a->ssn == b->ssn);
    assert_int_equal(a->inc, b->inc);
    assert_int_equal(a->tag, b->tag);
    assert_true(a->lseq == b->lseq && a->lack == b->lack);
}

/* ---- tests ------------------------------------------------------------ */

static void test_types(void **st)
{
    (void)st;
    int valid = 0;
    for (unsigned t = 0; t < 300; t++) {
        int v = phx_frame_type_valid(t);
        valid += v;
        assert_non_null(phx_frame_type_name(t));
        assert_int_equal(v, strcmp(phx_frame_type_name(t), "UNKNOWN") != 0);
    }
    assert_int_equal(valid, (int)NTYPES);
    assert_string_equal(phx_frame_type_name(PHX_FT_APP), "APP");
    printf("types: 300 values checked, %d valid\n", valid);
}

/* A BATCH payload: the sub-header's layout byte by byte, entries walked
 * back with the outer header's link fields, and every malformed payload
 * refused whole. */
static void test_batch(void **st)
{
    (void)st;
    phx_frame_hdr_t a = phx_frame_hdr(PHX_FT_APP, 0x01020304u, 0x1112131415161718ull, 0x2122232425262728ull, 3);
    a.ssn = 0x3132333435363738ull;
    phx_frame_hdr_t b = phx_frame_hdr(PHX_FT_SPAWN, 7, 1, 2, 0);
    uint8_t p[2 * PHX_BATCH_SUB + 3];
    phx_batch_put(p, &a);
    memcpy(p + PHX_BATCH_SUB, "xyz", 3);
    phx_batch_put(p + PHX_BATCH_SUB + 3, &b);
    static const uint8_t want[PHX_BATCH_SUB] = {
        PHX_FT_APP, 0x04, 0x03, 0x02, 0x01, 3, 0, 0, 0,
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
        0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21,
        0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31 };
    assert_memory_equal(p, want, PHX_BATCH_SUB);
    assert_int_equal(phx_batch_check(p, sizeof p, NULL), 2);
    phx_frame_hdr_t outer = phx_frame_hdr(PHX_FT_BATCH, 0, 0, 0, sizeof p), e;
    outer.inc = 9;
    outer.lseq = 41;
    outer.lack = 40;
    phx_batch_begin(&e, &outer);
    int r = phx_batch_next(p, sizeof p, &e, NULL);
    assert_int_equal(r, PHX_BATCH_SUB + 3);
    assert_int_equal(e.type, PHX_FT_APP);
    assert_int_equal(e.tag, a.tag);
    assert_int_equal(e.len, 3);
    assert_true(e.src == a.src && e.dst == a.dst && e.ssn == a.ssn);
    assert_true(e.inc == 9 && e.lseq == 41 && e.lack == 40 && e.flags == 0);
    r = phx_batch_next(p + r, sizeof p - (size_t)r, &e, NULL);
    assert_int_equal(r, PHX_BATCH_SUB);
    assert_true(e.type == PHX_FT_SPAWN && e.tag == 7 && e.len == 0 && e.src == 1 && e.dst == 2);
    /* one entry, cut short anywhere, a length past the end, a foreign type */
    const char *why;
    assert_int_equal(phx_batch_check(p, PHX_BATCH_SUB + 3, &why), PHX_EPROTO);
    assert_true(why[0] != '\0');
    for (size_t cut = 1; cut < sizeof p; cut++)
        if (cut != PHX_BATCH_SUB + 3)
            assert_int_equal(phx_batch_check(p, cut, NULL), PHX_EPROTO);
    uint8_t q[sizeof p];
    memcpy(q, p, sizeof p);
    q[5] = 4;   /* the first entry's len: runs into the second */
    assert_int_equal(phx_batch_check(q, sizeof q, NULL), PHX_EPROTO);
    memcpy(q, p, sizeof p);
    q[0] = PHX_FT_CTRL;
    assert_int_equal(phx_batch_check(q, sizeof q, &why), PHX_EPROTO);
    assert_non_null(strstr(why, "type"));
    printf("batch: layout pinned, 2 entries walked, %zu truncations refused\n", sizeof p - 2);
}

static void test_layout(void **st)
{
    (void)st;
    /* Pin the byte layout so a refactor cannot silently change the wire. */
    uint8_t out[PHX_FRAME_HDR + 3];
    phx_frame_hdr_t h = { .type = PHX_FT_APP, .flags = 1, .len = 3,
                          .src = 0x0102030405060708ull, .dst = 0x1112131415161718ull,
                          .ssn = 0x2122232425262728ull, .inc = 0x31323334, .tag = 0x41424344,
                          .lseq = 0x5152535455565758ull, .lack = 0x6162636465666768ull };
    memcpy(out + PHX_FRAME_HDR, "abc", 3);
    phx_frame_encode(out, &h, "abc");
    assert_memory_equal(out, "PHLX", 4);
    assert_int_equal(out[4], 3);
    assert_int_equal(out[5], 16);
    assert_int_equal(out[6], 1); assert_int_equal(out[7], 0);
    assert_int_equal(out[8], 3); assert_int_equal(out[11], 0);
    assert_int_equal(out[16], 0x08); assert_int_equal(out[23], 0x01);
    assert_int_equal(out[24], 0x18); assert_int_equal(out[32], 0x28);
    assert_int_equal(out[40], 0x34); assert_int_equal(out[44], 0x44); assert_int_equal(out[47], 0x41);
    assert_int_equal(out[48], 0x58); assert_int_equal(out[55], 0x51);
    assert_int_equal(out[56], 0x68); assert_int_equal(out[63], 0x61);
    assert_int_equal(h.magic, PHX_FRAME_MAGIC);
    assert_int_equal(h.version, PHX_WIRE_VERSION);
    /* crc = CRC32C(payload || header with crc zeroed), computed independently */
    uint8_t tmp[3 + PHX_FRAME_HDR];
    memcpy(tmp, "abc", 3);
    memcpy(tmp + 3, out, PHX_FRAME_HDR);
    memset(tmp + 3 + 12, 0, 4);
    uint32_t want = ref_crc32c(0, tmp, sizeof tmp);
    assert_int_equal(h.crc, want);
    assert_int_equal(phx_get_le32(out + 12), want);
    /* put_hdr + seal, as the transport builds frames, gives a valid frame */
    phx_frame_hdr_t h2 = h;
    phx_frame_put_hdr(out, &h2, "abc");
    phx_frame_seal(out, 7, 9);
    phx_frame_hdr_t d;
    assert_int_equal(phx_frame_decode(out, sizeof out, 16, &d, NULL), (int)sizeof out);
    assert_true(d.lseq == 7 && d.lack == 9 && d.ssn == h.ssn);
    /* the peeks read what the encoder and the seal wrote */
    assert_int_equal(phx_frame_peek_len(out), 3);
    assert_true(phx_frame_peek_lseq(out) == 7);
    printf("layout: 24 byte-position checks, seal, peeks\n");
}

static void test_roundtrip(void **st)
{
    (void)st;
    rng_state = 7;
    static uint8_t buf[PHX_FRAME_HDR + 70000];
    int n = 0;
    for (int i = 0; i < 2000; i++) {
        size_t len = i < 100 ? (size_t)i : (i % 97 == 0 ? 65536 + rnd() % 4000 : rnd() % 600);
        phx_frame_hdr_t h, d;
        size_t tot = mk_frame(buf, &h, len);
        const char *why = "x";
        int rc = phx_frame_decode(buf, tot, 70000, &d, &why);
        assert_int_equal(rc, (int)tot);
        assert_string_equal(why, "");
        assert_hdr_eq(&h, &d);
        /* trailing bytes of the next frame never change the result */
        rc = phx_frame_decode(buf, tot < sizeof buf ? tot + 1 : tot, 70000, &d, NULL);
        assert_int_equal(rc, (int)tot);
        /* max_payload == len is allowed, len - 1 is not */
        assert_int_equal(phx_frame_decode(buf, tot, (uint32_t)len, &d, NULL), (int)tot);
        if (len)
            assert_int_equal(phx_frame_decode(buf, tot, (uint32_t)len - 1, &d, NULL), PHX_EPROTO);
        n++;
    }
    printf("roundtrip: %d frames\n", n);
}

static void test_truncation(void **st)
{
    (void)st;
    rng_state = 11;
    uint8_t buf[PHX_FRAME_HDR + 200];
    int n = 0;
    for (size_t len = 0; len <= 200; len += 13) {
        phx_frame_hdr_t h, d;
        size_t tot = mk_frame(buf, &h, len);
        for (size_t cut = 0; cut < tot; cut++) {
            memset(&d, 0xAB, sizeof d);
            /* a copy of exactly `cut` bytes so ASan catches any overread */
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            assert_int_equal(phx_frame_decode(p, cut, 1000, &d, NULL), PHX_ETRUNC);
            if (cut >= PHX_FRAME_HDR)
                assert_int_equal(d.len, len);   /* header available for buffering */
            free(p);
            n++;
        }
    }
    printf("truncation: %d prefixes\n", n);
}

static void test_field_corruption(void **st)
{
    (void)st;
    rng_state = 13;
    uint8_t buf[PHX_FRAME_HDR + 64], bad[PHX_FRAME_HDR + 64];
    phx_frame_hdr_t h, d;
    size_t tot = mk_frame(buf, &h, 64);
    const char *why;
    int n = 0;

    /* every single-bit flip anywhere in the frame is rejected, with the
     * code of the field it lands in */
    for (size_t bit = 0; bit < tot * 8; bit++) {
        memcpy(bad, buf, tot);
        bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        size_t off = bit / 8;
        why = NULL;
        int rc = phx_frame_decode(bad, tot, 1000, &d, &why);
        assert_true(rc < 0);
        int want;
        if (off < 4) want = PHX_EPROTO;
        else if (off == 4) want = PHX_EVERSION;
        else if (off == 5) want = phx_frame_type_valid(bad[5]) ? PHX_ECHECKSUM : PHX_EPROTO;
        else if (off < 8) want = (phx_get_le16(bad + 6) & ~PHX_FRAME_F_MASK) ? PHX_EPROTO : PHX_ECHECKSUM;
        else if (off < 12) {
            uint32_t l = phx_get_le32(bad + 8);
            want = l > 1000 ? PHX_EPROTO : (PHX_FRAME_HDR + l > tot ? PHX_ETRUNC : PHX_ECHECKSUM);
        } else want = PHX_ECHECKSUM;
        assert_int_equal(rc, want);
        if (rc != PHX_ETRUNC) {
            assert_non_null(why);
            assert_true(strlen(why) > 0);
        }
        n++;
    }
    /* specific reasons */
    memcpy(bad, buf, tot); bad[0] = 'X';
    assert_int_equal(phx_frame_decode(bad, tot, 1000, &d, &why), PHX_EPROTO);
    assert_non_null(strstr(why, "bad magic 0x")), n++;
    memcpy(bad, buf, tot); bad[4] = 1;   /* the previous wire version */
    assert_int_equal(phx_frame_decode(bad, tot, 1000, &d, &why), PHX_EVERSION), n++;
    memcpy(bad, buf, tot); bad[5] = 99;
    assert_int_equal(phx_frame_decode(bad, tot, 1000, &d, &why), PHX_EPROTO);
    assert_non_null(strstr(why, "type")), n++;
    memcpy(bad, buf, tot); bad[7] = 0x80;
    assert_int_equal(phx_frame_decode(bad, tot, 1000, &d, &why), PHX_EPROTO);
    assert_non_null(strstr(why, "flag")), n++;
    memcpy(bad, buf, tot); bad[12] ^= 1;
    assert_int_equal(phx_frame_decode(bad, tot, 1000, &d, &why), PHX_ECHECKSUM);
    assert_non_null(strstr(why, "crc")), n++;
    printf("corruption: %d cases\n", n);
}

static void test_fail_fast(void **st)
{
    (void)st;
    rng_state = 17;
    uint8_t buf[PHX_FRAME_HDR + 10];
    phx_frame_hdr_t h, d;
    mk_frame(buf, &h, 10);
    int n = 0;
    /* an oversized len is rejected with just the header, no payload present */
    phx_put_le32(buf + 8, 0xFFFFFFF0u);
    assert_int_equal(phx_frame_decode(buf, 12, 1u << 20, &d, NULL), PHX_EPROTO), n++;
    assert_int_equal(phx_frame_decode(buf, PHX_FRAME_HDR, 1u << 20, &d, NULL), PHX_EPROTO), n++;
    /* even an unlimited caller cannot exceed the int-representable total */
    assert_int_equal(phx_frame_decode(buf, PHX_FRAME_HDR, UINT32_MAX, &d, NULL), PHX_EPROTO), n++;
    phx_put_le32(buf + 8, PHX_FRAME_LEN_HARDMAX);
    assert_int_equal(phx_frame_decode(buf, PHX_FRAME_HDR, UINT32_MAX, &d, NULL), PHX_ETRUNC), n++;
    /* bad magic/version/type/flags fail on the first bytes */
    assert_int_equal(phx_frame_decode((const uint8_t *)"GET / HTTP/1.1", 4, 100, &d, NULL), PHX_EPROTO), n++;
    uint8_t v[5] = { 'P', 'H', 'L', 'X', 9 };
    assert_int_equal(phx_frame_decode(v, 5, 100, &d, NULL), PHX_EVERSION), n++;
    uint8_t t[6] = { 'P', 'H', 'L', 'X', PHX_WIRE_VERSION, 0 };
    assert_int_equal(phx_frame_decode(t, 6, 100, &d, NULL), PHX_EPROTO), n++;
    uint8_t f[8] = { 'P', 'H', 'L', 'X', PHX_WIRE_VERSION, PHX_FT_APP, 2, 0 };
    assert_int_equal(phx_frame_decode(f, 8, 100, &d, NULL), PHX_EPROTO), n++;
    f[6] = 1;
    assert_int_equal(phx_frame_decode(f, 8, 100, &d, NULL), PHX_ETRUNC), n++;
    printf("fail-fast: %d cases\n", n);
}

static void test_stream(void **st)
{
    (void)st;
    rng_state = 2024;
    enum { NF = 3000 };
    size_t cap = (size_t)NF * (PHX_FRAME_HDR + 300);
    uint8_t *stream = malloc(cap), *rx = malloc(cap);
    phx_frame_hdr_t *hs = malloc(NF * sizeof *hs);
    assert_non_null(stream); assert_non_null(rx); assert_non_null(hs);
    size_t total = 0;
    for (int i = 0; i < NF; i++)
        total += mk_frame(stream + total, &hs[i], rnd() % 300);

    for (int round = 0; round < 4; round++) {
        /* chunk sizes: tiny (1..3), small, around a header, large */
        static const size_t maxchunk[] = { 3, 64, 100, 9000 };
        size_t fed = 0, have = 0, consumed = 0;
        int got = 0, calls = 0;
        while (fed < total || have > consumed) {
            size_t c = 1 + rnd() % maxchunk[round];
            if (c > total - fed) c = total - fed;
            memcpy(rx + have, stream + fed, c);   /* rx never compacts: offsets stay simple */
            have += c;
            fed += c;
            for (;;) {
                phx_frame_hdr_t d;
                int rc = phx_frame_decode(rx + consumed, have - consumed, 300, &d, NULL);
                calls++;
                if (rc == PHX_ETRUNC) break;
                assert_true(rc > 0);
                assert_true(got < NF);
                assert_hdr_eq(&d, &hs[got]);
                assert_memory_equal(rx + consumed + PHX_FRAME_HDR,
                                    stream + consumed + PHX_FRAME_HDR, d.len);
                consumed += (size_t)rc;
                got++;
            }
            if (fed == total && have == consumed) break;
            assert_true(fed < total || have > consumed);
            if (fed == total) fail_msg("stream ended with %zu undecoded bytes", have - consumed);
        }
        assert_int_equal(got, NF);
        assert_int_equal(consumed, total);
        printf("stream round %d: %d frames, %zu bytes, %d decode calls\n", round, got, total, calls);
    }
    free(stream); free(rx); free(hs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_threads),
        cmocka_unit_test(test_crc_vectors),
        cmocka_unit_test(test_crc_ref_chain),
        cmocka_unit_test(test_crc_copy_combine),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_field_corruption),
        cmocka_unit_test(test_fail_fast),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* libFuzzer entry point for the wire decoders.
 *
 * Input byte 0 is a control byte: bit0 = repair CRCs so mutated frames get
 * past the checksum and reach the deeper paths, bits1-2 = max_payload
 * choice, bits3-7 = seed for the chunking of the stream. The rest is the
 * byte stream a peer would send. It is decoded the way the transport will:
 * bytes arrive in chunks, whole frames are consumed, HELLO/AUTH payloads go
 * to a handshake state machine, every other frame's link fields (lseq/lack)
 * go to a receiving phx_link as the transport feeds them, and the first hard
 * error (decoder or link) ends the stream.
 *
 * Oracles beyond the sanitizers (abort on violation): a decoded frame
 * re-encodes to the identical 64 header bytes; sizes stay within the input;
 * every hard error carries a reason; the link delivers sequence numbers 1,
 * 2, 3... with no gap or repeat; a frame resealed by a sending link decodes
 * with the number it was given, and its resend copy is byte-identical; a
 * BATCH frame's payload is accepted by phx_batch_check exactly when walking
 * it entry by entry with phx_batch_next succeeds, and every entry re-encodes
 * to its identical sub-header. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "net/auth.h"
#include "net/crc32c.h"
#include "net/frame.h"
#include "net/link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

static void repair_crcs(uint8_t *b, size_t n)
{
    size_t off = 0;
    while (n - off >= PHX_FRAME_HDR) {
        uint32_t len = phx_get_le32(b + off + 8);
        if (len > n - off - PHX_FRAME_HDR)
            return;
        /* payload first, then the header with the crc field zeroed */
        memset(b + off + 12, 0, 4);
        uint32_t c = phx_crc32c(0, b + off + PHX_FRAME_HDR, len);
        c = phx_crc32c(c, b + off, PHX_FRAME_HDR);
        phx_put_le32(b + off + 12, c);
        off += PHX_FRAME_HDR + len;
    }
}

/* The transport's link rules on one decoded post-handshake frame. Returns 0
 * to go on, -1 where the transport would close the connection. */
static int feed_link(phx_link_t *rxl, phx_link_t *txl, uint64_t *delivered, const uint8_t *f,
                     const phx_frame_hdr_t *h)
{
    uint64_t freed;
    if (phx_link_on_ack(rxl, h->lack, &freed) < 0) {
        CHECK(h->lack > 0);   /* rxl never sent anything: any ack is too high */
        return -1;
    }
    CHECK(freed == 0);
    if (h->type == PHX_FT_ACK)
        return h->lseq || h->len ? -1 : 0;
    int rc = phx_link_on_recv(rxl, h->lseq);
    if (rc < 0) {
        CHECK(h->lseq == 0 || h->lseq > *delivered + 1);
        return -1;
    }
    CHECK(rc == (h->lseq == *delivered + 1));
    if (rc)
        *delivered = h->lseq;
    /* the same frame through a sender: sealed, retained, resent */
    size_t sz = PHX_FRAME_HDR + (size_t)h->len;
    uint8_t *copy = malloc(sz);
    if (!copy)
        abort();
    memcpy(copy, f, sz);
    phx_frame_hdr_t uh = *h;   /* back to unsealed, as frame_append leaves it */
    phx_frame_put_hdr(copy, &uh, copy + PHX_FRAME_HDR);
    CHECK(phx_link_seal(txl, copy, sz) == 1);
    phx_frame_hdr_t d;
    CHECK(phx_frame_decode(copy, sz, PHX_FRAME_LEN_HARDMAX, &d, NULL) == (int)sz);
    CHECK(d.lack == 0 && d.lseq >= 1);   /* txl never receives: it acks nothing */
    CHECK(phx_link_retain(txl, copy, sz, sz, 1, 1, &freed) == 0 && freed == 0);
    uint8_t *rs;
    long n = phx_link_resend(txl, &rs);
    CHECK(n >= (long)sz && memcmp(rs + n - (long)sz, copy, sz) == 0);
    free(rs);
    return 0;
}

/* A BATCH frame's entries, walked as the transport delivers them. */
static void feed_batch(const phx_frame_hdr_t *outer, const uint8_t *p)
{
    const char *why = NULL;
    int n = phx_batch_check(p, outer->len, &why);
    CHECK(n >= 2 || (n == PHX_EPROTO && why && why[0] != '\0'));
    int k = 0, bad = 0;
    phx_frame_hdr_t e;
    phx_batch_begin(&e, outer);
    for (size_t off = 0; off < outer->len; k++) {
        int r = phx_batch_next(p + off, outer->len - off, &e, &why);
        if (r < 0) {
            CHECK(r == PHX_EPROTO && why && why[0] != '\0');
            bad = 1;
            break;
        }
        CHECK((size_t)r == PHX_BATCH_SUB + (size_t)e.len && (size_t)r <= outer->len - off);
        CHECK(e.type == PHX_FT_APP || e.type == PHX_FT_SPAWN);
        CHECK(e.inc == outer->inc && e.lseq == outer->lseq && e.lack == outer->lack && e.flags == 0);
        uint8_t re[PHX_BATCH_SUB];
        phx_batch_put(re, &e);
        CHECK(memcmp(re, p + off, PHX_BATCH_SUB) == 0);
        off += (size_t)r;
    }
    CHECK(n < 0 ? bad || k < 2 : !bad && k == n);
}

static void feed_auth(phx_auth_t *a, const phx_frame_hdr_t *h, const uint8_t *p)
{
    uint8_t out[PHX_AUTH_MAC_LEN];
    if (h->type == PHX_FT_HELLO) {
        phx_auth_hello_t hh;
        int rc = phx_auth_hello_parse(p, h->len, &hh);
        CHECK(rc == PHX_OK || rc == PHX_EPROTO);
        CHECK((rc == PHX_OK) == (h->len == PHX_AUTH_HELLO_LEN));
        rc = phx_auth_on_hello(a, p, h->len, out, sizeof out);
        CHECK(rc == PHX_AUTH_MAC_LEN || rc == PHX_EPROTO || rc == PHX_EAUTH);
    } else if (h->type == PHX_FT_AUTH) {
        int rc = phx_auth_on_auth(a, p, h->len);
        /* the nonce is fresh per run, so no input can carry a valid MAC */
        CHECK(rc == PHX_EAUTH);
        CHECK(!phx_auth_done(a));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {   /* auth failures are expected by the thousand */
        phx_log_set_level(PHX_LOG_ERROR);
        quiet = 1;
    }
    if (size == 0)
        return 0;
    static const uint32_t maxp[] = { 0, 48, 1024, 1u << 20 };
    uint8_t ctl = data[0];
    uint32_t max_payload = maxp[(ctl >> 1) & 3];
    const uint8_t *in = data + 1;
    size_t n = size - 1;

    /* a copy of exactly n bytes (ASan sees any overread); CRCs maybe fixed */
    uint8_t *stream = malloc(n ? n : 1), *rx = malloc(n ? n : 1);
    if (!stream || !rx)
        abort();
    memcpy(stream, in, n);
    if (ctl & 1)
        repair_crcs(stream, n);

    phx_auth_t *a = NULL;
    static const uint8_t secret[] = "fuzz-secret";
    if (phx_auth_create(secret, sizeof secret - 1, 0, 1, 1, -1, &a) != PHX_OK)
        abort();
    uint8_t hello[PHX_AUTH_HELLO_LEN];
    CHECK(phx_auth_hello(a, hello, sizeof hello) == PHX_AUTH_HELLO_LEN);

    phx_link_t *rxl, *txl;
    if (phx_link_create(&rxl) || phx_link_create(&txl))
        abort();
    uint64_t delivered = 0;
    uint32_t rs = 0x9E3779B9u * ((ctl >> 3) + 1u);
    size_t fed = 0, have = 0, consumed = 0;
    int closed = 0;
    while (!closed && fed < n) {
        rs = rs * 1103515245u + 12345u;
        size_t c = 1 + (rs >> 16) % 97;
        if (c > n - fed)
            c = n - fed;
        memcpy(rx + have, stream + fed, c);
        have += c;
        fed += c;
        for (;;) {
            phx_frame_hdr_t h;
            const char *why = NULL;
            size_t avail = have - consumed;
            int rc = phx_frame_decode(rx + consumed, avail, max_payload, &h, &why);
            if (rc == PHX_ETRUNC) {
                CHECK(why && why[0] == '\0');
                if (avail >= PHX_FRAME_HDR)
                    CHECK(PHX_FRAME_HDR + (size_t)h.len > avail && h.len <= max_payload);
                break;
            }
            if (rc < 0) {
                CHECK(rc == PHX_EPROTO || rc == PHX_EVERSION || rc == PHX_ECHECKSUM);
                CHECK(why && why[0] != '\0');
                closed = 1;
                break;
            }
            CHECK((size_t)rc <= avail && (size_t)rc == PHX_FRAME_HDR + (size_t)h.len);
            CHECK(h.len <= max_payload && phx_frame_type_valid(h.type));
            uint8_t re[PHX_FRAME_HDR];
            phx_frame_hdr_t copy = h;
            phx_frame_encode(re, &copy, rx + consumed + PHX_FRAME_HDR);
            CHECK(memcmp(re, rx + consumed, PHX_FRAME_HDR) == 0 && copy.crc == h.crc);
            if (h.type == PHX_FT_HELLO || h.type == PHX_FT_AUTH || h.type == PHX_FT_AUTH_OK)
                feed_auth(a, &h, rx + consumed + PHX_FRAME_HDR);
            else if (feed_link(rxl, txl, &delivered, rx + consumed, &h) < 0)
                closed = 1;
            if (h.type == PHX_FT_BATCH)
                feed_batch(&h, rx + consumed + PHX_FRAME_HDR);
            consumed += (size_t)rc;
            if (closed)
                break;
        }
    }
    phx_auth_destroy(a);
    phx_link_destroy(rxl);
    phx_link_destroy(txl);

    /* the handshake decoders on the raw bytes, regardless of framing */
    phx_auth_hello_t hh;
    (void)phx_auth_hello_parse(in, n, &hh);
    if (phx_auth_create(secret, sizeof secret - 1, 7, 1, 1, -1, &a) == PHX_OK) {
        uint8_t out[PHX_AUTH_MAC_LEN];
        CHECK(phx_auth_hello(a, hello, sizeof hello) == PHX_AUTH_HELLO_LEN);
        size_t hl = n < PHX_AUTH_HELLO_LEN ? n : PHX_AUTH_HELLO_LEN;
        if (phx_auth_on_hello(a, in, ctl & 0x80 ? hl : n, out, sizeof out) == PHX_AUTH_MAC_LEN)
            CHECK(phx_auth_on_auth(a, in + hl, n - hl) == PHX_EAUTH);
        phx_auth_destroy(a);
    }
    free(stream);
    free(rx);
    return 0;
}

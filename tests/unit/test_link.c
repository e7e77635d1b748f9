/* phx_link: sequence numbers, cumulative acks and resend, socket-free.
 * A sender link and a receiver link exchange frames through a simulated
 * byte stream that is cut (everything in flight lost, acks included) at
 * every frame boundary, once and twice; the receiver must deliver every
 * frame exactly once, in order, and the sender must release every byte
 * and every unit of charge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/phx_err.h"
#include "net/frame.h"
#include "net/link.h"

/* Encodes count frames whose payloads are the u32 indexes first.. into a
 * malloc'd buffer, unsealed (as the transport's frame_append leaves them). */
static uint8_t *mk_batch(uint32_t first, int count, size_t *len)
{
    *len = (size_t)count * (PHX_FRAME_HDR + 4);
    uint8_t *b = malloc(*len ? *len : 1);
    assert_non_null(b);
    for (int i = 0; i < count; i++) {
        uint8_t *f = b + (size_t)i * (PHX_FRAME_HDR + 4);
        phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = 4 };
        phx_put_le32(f + PHX_FRAME_HDR, first + (uint32_t)i);
        phx_frame_put_hdr(f, &h, f + PHX_FRAME_HDR);
    }
    return b;
}

typedef struct sim {
    phx_link_t *tx, *rx;
    uint8_t *wire;              /* bytes written, not yet read by rx */
    size_t wlen, wcap;
    uint32_t next_idx;          /* next payload index to produce */
    uint32_t delivered;         /* rx: payload indexes seen, in order */
    uint64_t charged, released;
    int dups;
} sim_t;

static void wire_put(sim_t *s, const uint8_t *p, size_t n)
{
    if (s->wlen + n > s->wcap) {
        s->wcap = (s->wlen + n) * 2;
        s->wire = realloc(s->wire, s->wcap);
        assert_non_null(s->wire);
    }
    memcpy(s->wire + s->wlen, p, n);
    s->wlen += n;
}

/* tx writes one batch of count frames with charge 10 per frame. */
static void send_batch(sim_t *s, int count)
{
    size_t len;
    uint8_t *b = mk_batch(s->next_idx, count, &len);
    s->next_idx += (uint32_t)count;
    assert_int_equal(phx_link_seal(s->tx, b, len), count);
    wire_put(s, b, len);
    uint64_t freed = 0;
    s->charged += 10u * (uint64_t)count;
    assert_int_equal(phx_link_retain(s->tx, b, len, len, count, 10u * (uint64_t)count, &freed), 0);
    s->released += freed;
}

/* rx reads up to max frames off the wire; returns how many it read. */
static int recv_frames(sim_t *s, int max)
{
    size_t off = 0;
    int n = 0;
    while (n < max && off < s->wlen) {
        phx_frame_hdr_t h;
        const char *why;
        int r = phx_frame_decode(s->wire + off, s->wlen - off, 1024, &h, &why);
        assert_true(r > 0);
        int d = phx_link_on_recv(s->rx, h.lseq);
        assert_true(d == 0 || d == 1);
        if (d == 1) {
            assert_int_equal(phx_get_le32(s->wire + off + PHX_FRAME_HDR), s->delivered);
            s->delivered++;
        } else {
            s->dups++;
        }
        off += (size_t)r;
        n++;
    }
    memmove(s->wire, s->wire + off, s->wlen - off);
    s->wlen -= off;
    return n;
}

/* rx acks (a standalone ACK reaching tx). */
static void ack(sim_t *s)
{
    uint64_t freed = 0;
    assert_int_equal(phx_link_on_ack(s->tx, phx_link_take_ack(s->rx), &freed), 0);
    s->released += freed;
}

/* The connection drops: whatever is in flight is lost; after the new
 * handshake tx rewrites everything past rx's last ack. */
static void cut_and_resend(sim_t *s)
{
    s->wlen = 0;
    uint8_t *r;
    long n = phx_link_resend(s->tx, &r);
    assert_true(n >= 0);
    if (n) {
        wire_put(s, r, (size_t)n);
        free(r);
    }
}

static void sim_init(sim_t *s)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(phx_link_create(&s->tx), 0);
    assert_int_equal(phx_link_create(&s->rx), 0);
}

static void sim_finish(sim_t *s, uint32_t total)
{
    recv_frames(s, 1 << 30);
    ack(s);
    assert_int_equal(s->delivered, total);
    assert_int_equal(phx_link_retained(s->tx), 0);
    assert_true(s->released == s->charged);
    phx_link_destroy(s->tx);
    phx_link_destroy(s->rx);
    free(s->wire);
}

/* 3 batches of 4 frames; cut after rx read k frames (k = 0..12), with the
 * ack of what it read delivered before the cut or lost with it. */
static void test_cut_everywhere(void **st)
{
    (void)st;
    int cases = 0;
    for (int k = 0; k <= 12; k++) {
        for (int acked = 0; acked < 2; acked++) {
            sim_t s;
            sim_init(&s);
            for (int b = 0; b < 3; b++)
                send_batch(&s, 4);
            recv_frames(&s, k);
            if (acked)
                ack(&s);
            cut_and_resend(&s);
            send_batch(&s, 2);   /* new frames follow the resent ones */
            sim_finish(&s, 14);
            /* tx resends past the last ack it saw: what rx read since is
             * dropped as duplicates, nothing else repeats */
            assert_int_equal(s.dups, acked ? 0 : k);
            cases++;
        }
    }
    printf("cut everywhere: %d cases\n", cases);
}

/* Two cuts: the second lands at every point of the resend of the first. */
static void test_cut_during_resend(void **st)
{
    (void)st;
    int cases = 0;
    for (int k1 = 0; k1 <= 8; k1++) {
        for (int k2 = 0; k2 <= 8; k2++) {
            sim_t s;
            sim_init(&s);
            send_batch(&s, 5);
            send_batch(&s, 3);
            recv_frames(&s, k1);
            cut_and_resend(&s);   /* ack lost with the connection */
            recv_frames(&s, k2);
            if (k2 & 1)
                ack(&s);
            cut_and_resend(&s);
            send_batch(&s, 1);
            sim_finish(&s, 9);
            cases++;
        }
    }
    printf("cut during resend: %d cases\n", cases);
}

/* rx read frames, its ack was lost, tx resends them: rx drops each as a
 * duplicate. */
static void test_duplicates_dropped(void **st)
{
    (void)st;
    sim_t s;
    sim_init(&s);
    send_batch(&s, 6);
    recv_frames(&s, 6);   /* all read; the ack never makes it */
    cut_and_resend(&s);
    recv_frames(&s, 1 << 30);
    assert_int_equal(s.dups, 6);
    assert_int_equal(s.delivered, 6);
    sim_finish(&s, 6);
}

/* The first retained batch acked in part: resend starts past the ack. */
static void test_partial_batch_ack(void **st)
{
    (void)st;
    sim_t s;
    sim_init(&s);
    send_batch(&s, 5);
    recv_frames(&s, 3);
    ack(&s);
    assert_int_equal(phx_link_retained(s.tx), 5 * (PHX_FRAME_HDR + 4));   /* batch held whole */
    assert_true(s.released == 0);
    uint8_t *r;
    long n = phx_link_resend(s.tx, &r);
    assert_int_equal(n, 2 * (PHX_FRAME_HDR + 4));
    phx_frame_hdr_t h;
    assert_true(phx_frame_decode(r, (size_t)n, 1024, &h, NULL) > 0);
    assert_true(h.lseq == 4);
    free(r);
    cut_and_resend(&s);
    sim_finish(&s, 5);
    assert_int_equal(s.dups, 0);
}

/* Acks and sequence numbers that no honest peer sends. */
static void test_protocol_errors(void **st)
{
    (void)st;
    phx_link_t *l;
    uint64_t freed = 1;
    assert_int_equal(phx_link_create(&l), 0);
    assert_int_equal(phx_link_on_ack(l, 1, &freed), PHX_EPROTO);   /* nothing sent yet */
    assert_int_equal(phx_link_on_ack(l, 0, &freed), 0);
    assert_true(freed == 0);
    assert_int_equal(phx_link_on_recv(l, 0), PHX_EPROTO);          /* unsequenced data */
    assert_int_equal(phx_link_on_recv(l, 2), PHX_EPROTO);          /* gap */
    assert_int_equal(phx_link_on_recv(l, 1), 1);
    assert_int_equal(phx_link_on_recv(l, 1), 0);                   /* duplicate */
    assert_int_equal(phx_link_on_recv(l, 3), PHX_EPROTO);
    assert_int_equal(phx_link_ack_due(l), 1);
    assert_true(phx_link_take_ack(l) == 1);
    assert_int_equal(phx_link_ack_due(l), 0);
    /* a run that ends in a partial frame is refused and numbers nothing */
    size_t len;
    uint8_t *b = mk_batch(0, 2, &len);
    assert_int_equal(phx_link_seal(l, b, len - 1), PHX_EPROTO);
    free(b);   /* its first frame may be sealed: a fresh run */
    b = mk_batch(0, 2, &len);
    assert_int_equal(phx_link_seal(l, b, len), 2);
    phx_frame_hdr_t h;
    assert_true(phx_frame_decode(b, len, 1024, &h, NULL) > 0);
    assert_true(h.lseq == 1 && h.lack == 1);   /* the ack rides along */
    assert_int_equal(phx_link_on_ack(l, 3, &freed), PHX_EPROTO);
    /* acked while the write was in flight: retain releases it at once */
    assert_int_equal(phx_link_on_ack(l, 2, &freed), 0);
    assert_int_equal(phx_link_retain(l, b, len, len, 2, 7, &freed), 0);
    assert_true(freed == 7);
    assert_int_equal(phx_link_retained(l), 0);
    assert_int_equal(phx_link_on_ack(l, 1, &freed), 0);   /* old ack: harmless */
    phx_link_destroy(l);
}

/* A new incarnation: everything retained is dropped and its charge returned. */
static void test_reset(void **st)
{
    (void)st;
    sim_t s;
    sim_init(&s);
    send_batch(&s, 3);
    send_batch(&s, 2);
    assert_true(phx_link_reset(s.tx) == 50);
    assert_int_equal(phx_link_retained(s.tx), 0);
    uint8_t *r;
    assert_int_equal(phx_link_resend(s.tx, &r), 0);
    assert_null(r);
    phx_link_destroy(s.tx);
    phx_link_destroy(s.rx);
    free(s.wire);
}

/* Many batches: the retained ring grows past its first size and wraps. */
static void test_many_batches(void **st)
{
    (void)st;
    sim_t s;
    sim_init(&s);
    uint32_t total = 0;
    for (int round = 0; round < 50; round++) {
        for (int b = 0; b < 20; b++) {
            send_batch(&s, 1 + (round + b) % 3);
            total += 1u + (uint32_t)((round + b) % 3);
        }
        recv_frames(&s, 7 + round % 5);
        if (round % 3)
            ack(&s);
        if (round % 4 == 1)
            cut_and_resend(&s);
    }
    sim_finish(&s, total);
    printf("many batches: %u frames\n", total);
}

/* ---- zero-copy frames: the payload tail is referenced, not in the run ---- */

#define EXT_LEN 600
static uint8_t ext_src[EXT_LEN + 64];   /* frame i references ext_src + i % 64 */
static int ext_released;

static void ext_release(void *arg)
{
    (void)arg;
    ext_released++;
}

/* tx writes count frames, each the u32 index inline and EXT_LEN referenced
 * bytes, as the transport's writev puts them on the wire. */
static void send_batch_ext(sim_t *s, int count)
{
    size_t inl = PHX_FRAME_HDR + 4, len = (size_t)count * inl;
    uint8_t *b = malloc(len);
    phx_link_ext_t *ext = malloc((size_t)count * sizeof *ext);
    assert_non_null(b);
    assert_non_null(ext);
    for (int i = 0; i < count; i++) {
        uint8_t *f = b + (size_t)i * inl;
        uint32_t idx = s->next_idx++;
        phx_frame_hdr_t h = { .type = PHX_FT_APP, .len = 4 + EXT_LEN };
        phx_put_le32(f + PHX_FRAME_HDR, idx);
        ext[i] = (phx_link_ext_t){ .at = (size_t)(f - b) + inl, .len = EXT_LEN, .p = ext_src + idx % 64,
                                   .release = ext_release };
        phx_frame_put_hdr2(f, &h, f + PHX_FRAME_HDR, 4, ext[i].p, EXT_LEN);
    }
    assert_int_equal(phx_link_seal_ext(s->tx, b, len, ext, count), count);
    for (int i = 0; i < count; i++) {
        wire_put(s, b + (size_t)i * inl, inl);
        wire_put(s, ext[i].p, EXT_LEN);
    }
    uint64_t freed = 0;
    s->charged += 10u * (uint64_t)count;
    assert_int_equal(phx_link_retain_ext(s->tx, b, len, len, count, ext, count, 10u * (uint64_t)count, &freed), 0);
    s->released += freed;
}

/* Mixed runs of copied and referenced frames, cut at every frame of the
 * first three batches: the resend puts the referenced bytes back in place
 * (the receiver's checksum and index checks pass), and every reference is
 * released exactly once, when acked. */
static void test_ext_cut_everywhere(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof ext_src; i++)
        ext_src[i] = (uint8_t)(i * 29 + 3);
    for (int k = 0; k <= 9; k++) {
        sim_t s;
        sim_init(&s);
        ext_released = 0;
        send_batch_ext(&s, 3);
        send_batch(&s, 2);
        send_batch_ext(&s, 4);
        recv_frames(&s, k);
        if (k % 2)
            ack(&s);
        cut_and_resend(&s);
        send_batch_ext(&s, 1);
        sim_finish(&s, 10);
        assert_int_equal(ext_released, 8);
    }
}

/* A run whose references do not end its frames is refused, numbering
 * nothing; a reset releases what is retained. */
static void test_ext_errors_and_reset(void **st)
{
    (void)st;
    sim_t s;
    sim_init(&s);
    size_t len;
    uint8_t *b = mk_batch(0, 2, &len);
    phx_link_ext_t bad = { .at = PHX_FRAME_HDR + 1, .len = 2,   /* not the tail */ .p = ext_src, .release = ext_release };
    assert_int_equal(phx_link_seal_ext(s.tx, b, len, &bad, 1), PHX_EPROTO);
    bad.at = len + 10;   /* past the run */
    assert_int_equal(phx_link_seal_ext(s.tx, b, len, &bad, 1), PHX_EPROTO);
    free(b);
    ext_released = 0;
    send_batch_ext(&s, 2);
    send_batch_ext(&s, 3);
    assert_int_equal(phx_link_retained(s.tx), 5 * (PHX_FRAME_HDR + 4 + EXT_LEN));
    assert_true(phx_link_reset(s.tx) == 50);
    assert_int_equal(ext_released, 5);
    assert_int_equal(phx_link_retained(s.tx), 0);
    phx_link_destroy(s.tx);
    phx_link_destroy(s.rx);
    free(s.wire);
}

static void test_inc_admit(void **st)
{
    (void)st;
    assert_int_equal(phx_link_inc_admit(3, 0, 3), PHX_LINK_ADMIT);   /* a reconnect */
    assert_int_equal(phx_link_inc_admit(3, 0, 4), PHX_LINK_WAIT);    /* old one not declared yet */
    assert_int_equal(phx_link_inc_admit(3, 0, 2), PHX_LINK_STALE);
    assert_int_equal(phx_link_inc_admit(3, 1, 4), PHX_LINK_ADMIT);   /* rejoins */
    assert_int_equal(phx_link_inc_admit(3, 1, 3), PHX_LINK_STALE);   /* the dead one stays dead */
    assert_int_equal(phx_link_inc_admit(3, 1, 1), PHX_LINK_STALE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_everywhere),
        cmocka_unit_test(test_cut_during_resend),
        cmocka_unit_test(test_duplicates_dropped),
        cmocka_unit_test(test_partial_batch_ack),
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_many_batches),
        cmocka_unit_test(test_ext_cut_everywhere),
        cmocka_unit_test(test_inc_admit),
        cmocka_unit_test(test_ext_errors_and_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

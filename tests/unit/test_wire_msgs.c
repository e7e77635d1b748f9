/* Round trips of every message struct past the frame (docs/wire.md):
 * encode -> decode -> the same fields; every truncation and a trailing
 * byte -> an error, never a crash; one message of each family checked
 * byte by byte against its documented layout, so a format change shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "base/phx_wire.h"
#include "core/ctl_msg.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/mlog/msg.h"
#include "ft/termination/msg.h"
#include "ft/termination/td_credit.h"

/* Every proper prefix and one trailing byte more fail to decode. */
#define TRUNCATIONS(buf, n, DEC)                                   \
    do {                                                           \
        uint8_t _t[2048];                                          \
        memcpy(_t, (buf), (n));                                    \
        for (size_t _k = 0; _k < (n); _k++)                        \
            assert_int_not_equal(DEC(_t, _k), 0);                  \
        _t[(n)] = 0;                                               \
        assert_int_not_equal(DEC(_t, (n) + 1), 0);                 \
    } while (0)

static void test_varint(void **st)
{
    (void)st;
    const uint64_t v[] = { 0, 1, 127, 128, 300, 16383, 16384, 1ull << 35, (1ull << 63) - 1, 1ull << 63, UINT64_MAX };
    const size_t want[] = { 1, 1, 1, 2, 2, 2, 3, 6, 9, 10, 10 };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t b[16];
        const size_t caps[2] = { want[i], 16 };   /* a short tail, and room for the direct path */
        for (int c = 0; c < 2; c++) {
            phx_wenc_t e;
            phx_wenc_init(&e, b, caps[c]);
            phx_wenc_uv(&e, v[i]);
            assert_int_equal(phx_wenc_end(&e), (ptrdiff_t)want[i]);
            phx_wdec_t d;
            phx_wdec_init(&d, b, want[i]);
            assert_true(phx_wdec_uv(&d) == v[i]);
            assert_int_equal(phx_wdec_end(&d, 1), 0);
            for (size_t k = 0; k < want[i]; k++) {   /* truncated */
                phx_wdec_init(&d, b, k);
                assert_true(phx_wdec_uv(&d) == 0);
                assert_int_equal(phx_wdec_end(&d, 0), PHX_EPROTO);
            }
        }
        phx_wenc_t e;   /* one byte short: ENOSPC */
        phx_wenc_init(&e, b, want[i] - 1);
        phx_wenc_uv(&e, v[i]);
        assert_int_equal(phx_wenc_end(&e), PHX_ENOSPC);
    }
    uint8_t b[] = { 0x81, 0x01 };   /* LEB128: 129 */
    phx_wdec_t d;
    phx_wdec_init(&d, b, sizeof b);
    assert_true(phx_wdec_uv(&d) == 129);
    uint8_t over[11];
    memset(over, 0x80, sizeof over);   /* 11 bytes: longer than any u64 */
    over[10] = 0;
    phx_wdec_init(&d, over, sizeof over);
    phx_wdec_uv(&d);
    assert_int_equal(phx_wdec_end(&d, 0), PHX_EPROTO);
}

static void test_a32(void **st)
{
    (void)st;
    int v[3] = { -1, 7, 65536 };
    uint8_t b[12];
    phx_wenc_t e;
    phx_wenc_init(&e, b, sizeof b);
    phx_wenc_i32s(&e, v, 3, 0);
    assert_int_equal(phx_wenc_end(&e), 12);
    phx_wdec_t d;
    phx_wdec_init(&d, b, sizeof b);
    phx_wire_a32_t a = phx_wdec_a32(&d, 3);
    assert_int_equal(a.n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(phx_wire_a32_i32(a, (size_t)i), v[i]);
    phx_wdec_init(&d, b, 11);
    a = phx_wdec_a32(&d, 3);
    assert_null(a.p);
    assert_int_equal(phx_wdec_end(&d, 0), PHX_EPROTO);
    phx_wdec_init(&d, b, 12);   /* a count past the data (no overflow) */
    phx_wdec_a32(&d, SIZE_MAX / 2);
    assert_int_equal(phx_wdec_end(&d, 0), PHX_EPROTO);
}

/* ---- termination ---------------------------------------------------------- */

static int ds_dec(const uint8_t *b, size_t n)
{
    phx_ds_msg_t m;
    return phx_ds_msg_dec(b, n, &m);
}

static void test_ds(void **st)
{
    (void)st;
    phx_ds_entry_t ent[3] = { { 0, 0 }, { 5, 1 }, { 2, 0 } };
    phx_ds_msg_t all[] = {
        { .type = PHX_DS_M_ACK, .flags = PHX_DS_ACK_DISENGAGE, .count = 3 },
        { .type = PHX_DS_M_ACK, .count = 70000 },
        { .type = PHX_DS_M_PGC, .rank = 9, .seq = 1ull << 40 },
        { .type = PHX_DS_M_QUERY, .rank = 4, .gparent = -1 },
        { .type = PHX_DS_M_QUERY, .rank = 4, .gparent = 3 },
        { .type = PHX_DS_M_REPLY, .rank = 4, .debt = 1, .count = 3, .ent = ent },
        { .type = PHX_DS_M_REPLY, .rank = 4, .debt = 0, .count = 0, .ent = ent },
        { .type = PHX_DS_M_INTERIOR, .rank = 2, .seq = 11 },
        { .type = PHX_DS_M_EXTERIOR, .rank = 2 },
        { .type = PHX_DS_M_NOTIFY, .rank = 1, .xseq = 77 },
        { .type = PHX_DS_M_ANSWER, .xseq = 77, .engaged = 1, .unpaired = 0 },
        { .type = PHX_DS_M_ANNOUNCE },
        { .type = PHX_DS_M_FATAL },
        { .type = PHX_DS_M_FENCE, .seq = 12 },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        uint8_t b[PHX_DS_MSG_MAX(8)];
        long n = phx_ds_msg_enc(&all[i], b, sizeof b);
        assert_true(n > 0);
        phx_ds_msg_t m;
        assert_int_equal(phx_ds_msg_dec(b, (size_t)n, &m), 0);
        const phx_ds_msg_t *w = &all[i];
        assert_int_equal(m.type, w->type);
        assert_int_equal(m.flags, w->flags);
        assert_int_equal(m.debt, w->debt);
        assert_int_equal(m.engaged, w->engaged);
        assert_int_equal(m.unpaired, w->unpaired);
        assert_int_equal(m.rank, w->rank);
        assert_int_equal(m.count, w->count);
        assert_int_equal(m.xseq, w->xseq);
        assert_true(m.seq == w->seq);
        if (w->type == PHX_DS_M_QUERY)
            assert_int_equal(m.gparent, w->gparent);
        for (uint32_t k = 0; w->type == PHX_DS_M_REPLY && k < w->count; k++) {
            phx_ds_entry_t x = phx_ds_msg_entry(&m, k);
            assert_int_equal(x.rank, w->ent[k].rank);
            assert_int_equal(x.bit, w->ent[k].bit);
        }
        TRUNCATIONS(b, (size_t)n, ds_dec);
        assert_int_equal(phx_ds_msg_enc(&all[i], b, (size_t)n - 1), PHX_ENOSPC);
    }
    /* the layout, byte by byte: ACK = type, flags, u32 count */
    uint8_t b[16];
    assert_int_equal(phx_ds_msg_enc(&all[0], b, sizeof b), 6);
    const uint8_t ack[6] = { PHX_DS_M_ACK, 1, 3, 0, 0, 0 };
    assert_memory_equal(b, ack, 6);
    /* what the decoder refuses by structure */
    const uint8_t bad_flags[6] = { PHX_DS_M_ACK, 2, 1, 0, 0, 0 }, zero[6] = { PHX_DS_M_ACK, 0, 0, 0, 0, 0 };
    const uint8_t bad_type[1] = { PHX_DS_M_NTYPES }, bad_bit[15] = { PHX_DS_M_REPLY, 1, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 2 };
    phx_ds_msg_t m;
    assert_int_equal(phx_ds_msg_dec(bad_flags, 6, &m), PHX_EPROTO);
    assert_int_equal(phx_ds_msg_dec(zero, 6, &m), PHX_EPROTO);
    assert_int_equal(phx_ds_msg_dec(bad_type, 1, &m), PHX_EPROTO);
    assert_int_equal(phx_ds_msg_dec(bad_bit, 15, &m), PHX_EPROTO);
    uint8_t pb[4];
    phx_ds_pb_enc(pb, -1);
    assert_int_equal(phx_ds_pb_dec(pb), -1);
}

static int fc_dec(const uint8_t *b, size_t n) { phx_4c_msg_t m; return phx_4c_msg_dec(b, n, &m); }
static int tdc_dec(const uint8_t *b, size_t n) { phx_tdc_msg_t m; return phx_tdc_msg_dec(b, n, &m); }
static int ed_dec(const uint8_t *b, size_t n) { phx_ed_msg_t m; return phx_ed_msg_dec(b, n, &m); }

static void test_ff(void **st)
{
    (void)st;
    uint8_t b[32];
    phx_4c_msg_t fc[] = { { PHX_4C_M_STOP, 0, 1ull << 50, 3 }, { PHX_4C_M_DOWN, 1, 0, 0 } };
    for (int i = 0; i < 2; i++) {
        long n = phx_4c_msg_enc(&fc[i], b, sizeof b);
        phx_4c_msg_t m;
        assert_int_equal(phx_4c_msg_dec(b, (size_t)n, &m), 0);
        assert_int_equal(m.type, fc[i].type);
        assert_int_equal(m.term, fc[i].term);
        assert_true(m.sent == fc[i].sent && m.recvd == fc[i].recvd);
        TRUNCATIONS(b, (size_t)n, fc_dec);
    }
    phx_tdc_msg_t tc[] = { { PHX_TDC_FLUSH, 5 }, { PHX_TDC_BORROW, 0 }, { PHX_TDC_GRANT, 1ull << 32 }, { PHX_TDC_TERM, 0 } };
    for (int i = 0; i < 4; i++) {
        long n = phx_tdc_msg_enc(&tc[i], b, sizeof b);
        phx_tdc_msg_t m;
        assert_int_equal(phx_tdc_msg_dec(b, (size_t)n, &m), 0);
        assert_int_equal(m.type, tc[i].type);
        assert_true(m.credit == tc[i].credit);
        TRUNCATIONS(b, (size_t)n, tdc_dec);
    }
    const uint8_t grant[9] = { PHX_TDC_GRANT, 0, 0, 0, 0, 1, 0, 0, 0 };
    assert_int_equal(phx_tdc_msg_enc(&tc[2], b, sizeof b), 9);
    assert_memory_equal(b, grant, 9);
    phx_ed_msg_t ed[] = { { PHX_ED_M_STOP, 0, 0 }, { PHX_ED_M_RESUME, 3, 4 }, { PHX_ED_M_ACKT, 1, 2 },
                          { PHX_ED_M_ACK, 0, 9 }, { PHX_ED_M_TERM, 0, 0 } };
    for (int i = 0; i < 5; i++) {
        long n = phx_ed_msg_enc(&ed[i], b, sizeof b);
        phx_ed_msg_t m;
        assert_int_equal(phx_ed_msg_dec(b, (size_t)n, &m), 0);
        assert_int_equal(m.type, ed[i].type);
        assert_int_equal(m.s, ed[i].s);
        assert_int_equal(m.r, ed[i].r);
        TRUNCATIONS(b, (size_t)n, ed_dec);
    }
    uint8_t pb[8];
    phx_tdc_pb_enc(pb, 0x0102030405060708ull);
    assert_true(phx_tdc_pb_dec(pb) == 0x0102030405060708ull);
    assert_int_equal(pb[0], 8);
}

/* ---- recovery=cr ------------------------------------------------------------ */

static int ctl_dec(const uint8_t *b, size_t n) { phx_ck_ctl_t m; return phx_ck_ctl_dec(b, n, &m) || m.len; }
static int cack_dec(const uint8_t *b, size_t n) { phx_ck_cack_t m; return phx_ck_cack_dec(b, n, &m); }
static int ready_dec(const uint8_t *b, size_t n) { uint64_t q; return phx_ck_ready_dec(b, n, &q); }
static int join_dec(const uint8_t *b, size_t n) { uint32_t i; return phx_ck_join_dec(b, n, &i); }
static int abort_dec(const uint8_t *b, size_t n) { phx_ck_abort_t m; return phx_ck_abort_dec(b, n, &m); }
static int begin_dec(const uint8_t *b, size_t n) { phx_ck_begin_t m; return phx_ck_begin_dec(b, n, 3, 6, &m); }
static int eset_dec(const uint8_t *b, size_t n) { phx_ck_eset_t m; return phx_ck_eset_dec(b, n, 3, 6, &m); }
static int blob_dec(const uint8_t *b, size_t n) { phx_ck_blob_info_t i; return phx_ck_blob_scan(b, n, &i); }

static void test_ckpt_ctl(void **st)
{
    (void)st;
    uint8_t b[512];
    uint64_t id = phx_ck_id(3, 9);
    assert_int_equal(phx_ck_id_round(id), 3);
    assert_int_equal(phx_ck_id_epoch(id), 9);
    assert_true(phx_ck_id(3, 9) < phx_ck_id(4, 1));   /* the round orders first */
    phx_ck_ctl_enc(b, id);
    phx_ck_ctl_t c;
    assert_int_equal(phx_ck_ctl_dec(b, 8, &c), 0);
    assert_true(c.arg == id && c.len == 0);
    TRUNCATIONS(b, PHX_CK_CTL_HEAD, ctl_dec);

    phx_ck_chunk_t ch = { .kind = 2, .key = 7, .epoch = 9, .total = 1ull << 33, .off = (1ull << 33) - 3 }, chd;
    phx_ck_chunk_enc(b, &ch);
    memset(b + PHX_CK_CHUNK_HDR, 1, 3);
    assert_int_equal(phx_ck_chunk_dec(b, PHX_CK_CHUNK_HDR + 3, &chd), 0);
    assert_true(chd.kind == 2 && chd.key == 7 && chd.epoch == 9 && chd.total == ch.total && chd.off == ch.off);
    assert_int_equal(phx_ck_chunk_dec(b, PHX_CK_CHUNK_HDR + 4, &chd), PHX_EPROTO);   /* past total */
    for (size_t k = 0; k < PHX_CK_CHUNK_HDR; k++)
        assert_int_not_equal(phx_ck_chunk_dec(b, k, &chd), 0);
    const uint8_t head[5] = { 2, 7, 0, 0, 0 };
    assert_memory_equal(b, head, 5);

    phx_ck_cack_t ca = { 1, 4, 12345 }, cad;
    phx_ck_cack_enc(b, &ca);
    assert_int_equal(phx_ck_cack_dec(b, PHX_CK_CACK_LEN, &cad), 0);
    assert_true(cad.kind == 1 && cad.key == 4 && cad.got == 12345);
    TRUNCATIONS(b, PHX_CK_CACK_LEN, cack_dec);

    uint64_t q;
    phx_ck_ready_enc(b, 42);
    assert_int_equal(phx_ck_ready_dec(b, PHX_CK_READY_LEN, &q), 0);
    assert_true(q == 42);
    TRUNCATIONS(b, PHX_CK_READY_LEN, ready_dec);
    uint32_t inc;
    phx_ck_join_enc(b, 5);
    assert_int_equal(phx_ck_join_dec(b, PHX_CK_JOIN_LEN, &inc), 0);
    assert_int_equal(inc, 5);
    TRUNCATIONS(b, PHX_CK_JOIN_LEN, join_dec);
    phx_ck_abort_t ab;
    phx_ck_abort_enc(b, &(phx_ck_abort_t){ 2, -1 });
    assert_int_equal(phx_ck_abort_dec(b, PHX_CK_ABORT_LEN, &ab), 0);
    assert_true(ab.lost == 2 && ab.buddy == -1);
    TRUNCATIONS(b, PHX_CK_ABORT_LEN, abort_dec);

    int buddy[3] = { 1, 2, -1 }, loc[6] = { 0, 1, 1, 0, 0, 1 };
    for (int with = 0; with < 2; with++) {
        long n = phx_ck_begin_enc(&(phx_ck_begin_t){ .buddy = buddy, .loc = with ? loc : NULL }, 3, 6, b, sizeof b);
        assert_int_equal(n, with ? 36 : 12);
        phx_ck_begin_t m;
        assert_int_equal(phx_ck_begin_dec(b, (size_t)n, 3, 6, &m), 0);
        assert_int_equal(m.table.n, with ? 6 : 0);
        for (int i = 0; i < 3; i++)
            assert_int_equal(phx_wire_a32_i32(m.buddies, (size_t)i), buddy[i]);
        for (size_t i = 0; i < m.table.n; i++)
            assert_int_equal(phx_wire_a32_i32(m.table, i), loc[i]);
        for (size_t k = 0; k < (size_t)n; k++)
            if (k != 12)   /* the buddies alone are a BEGIN too */
                assert_int_not_equal(begin_dec(b, k), 0);
    }
    uint8_t dead[3] = { 0, 1, 0 };
    uint32_t incs[3] = { 0, 4, 0 };
    for (int joins = 0; joins < 2; joins++) {
        phx_ck_eset_t w = { .epoch = 77, .dead = dead, .flags = PHX_CK_D_DISK | PHX_CK_D_SEQ, .joins = joins,
                            .view = 3, .incs = incs, .loc = loc, .buddy = joins ? buddy : NULL };
        long n = phx_ck_eset_enc(&w, 3, 6, b, sizeof b);
        assert_int_equal(n, (long)phx_ck_eset_len(3, 6, joins));
        phx_ck_eset_t m;
        assert_int_equal(phx_ck_eset_dec(b, (size_t)n, 3, 6, &m), 0);
        assert_true(m.epoch == 77 && m.flags == w.flags && m.joins == joins && !memcmp(m.dead, dead, 3));
        if (joins) {
            assert_int_equal(m.view, 3);
            for (int i = 0; i < 3; i++) {
                assert_int_equal(phx_wire_a32_u32(m.inc, (size_t)i), incs[i]);
                assert_int_equal(phx_wire_a32_i32(m.buddies, (size_t)i), buddy[i]);
            }
            for (int i = 0; i < 6; i++)
                assert_int_equal(phx_wire_a32_i32(m.table, (size_t)i), loc[i]);
        }
        for (size_t k = 0; k < (size_t)n; k++)
            if (k != phx_ck_eset_len(3, 6, 0))
                assert_int_not_equal(eset_dec(b, k), 0);
    }
    /* no join tail given: the buddies go as -1 */
    phx_ck_eset_t w = { .epoch = 1, .dead = dead, .joins = 1, .incs = incs, .loc = loc };
    long n = phx_ck_eset_enc(&w, 3, 6, b, sizeof b);
    phx_ck_eset_t m;
    assert_int_equal(phx_ck_eset_dec(b, (size_t)n, 3, 6, &m), 0);
    assert_int_equal(phx_wire_a32_i32(m.buddies, 2), -1);
}

static void test_ckpt_blob(void **st)
{
    (void)st;
    uint8_t b[512];
    phx_wenc_t e;
    phx_wenc_init(&e, b, sizeof b);
    phx_ck_blob_head_enc(&e, &(phx_ck_blob_head_t){ .rank = 3, .creator = 0xfff0, .seq = 9, .ntasks = 1 });
    phx_ck_task_head_enc(&e, &(phx_ck_task_head_t){ .id = 0x30001, .type = 2, .rsn = 5 });
    phx_wenc_u32(&e, 1);   /* out_ssn */
    phx_wenc_u64(&e, 0x10001);
    phx_wenc_u64(&e, 4);
    phx_wenc_u32(&e, 0);   /* in_ssn */
    phx_wenc_u32(&e, 3);   /* state */
    phx_wenc_bytes(&e, "abc", 3);
    phx_wenc_u32(&e, 1);   /* held */
    phx_ck_msgrec_enc(&e, &(phx_ck_msgrec_t){ .kind = 1, .type = 2, .src = 1, .dst = 0x30001, .ssn = 6, .tag = 7,
                                              .len = 2, .data = "hi" });
    phx_wenc_u32(&e, 0);   /* queued */
    phx_wenc_u32(&e, 1);   /* finished */
    phx_wenc_u64(&e, 0x30002);
    size_t n = (size_t)phx_wenc_end(&e);
    phx_ck_blob_info_t bi;
    assert_int_equal(phx_ck_blob_scan(b, n, &bi), 0);
    assert_true(bi.head.rank == 3 && bi.head.creator == 0xfff0 && bi.head.seq == 9 && bi.head.ntasks == 1);
    assert_true(bi.queued == 0 && bi.gone == 1);
    /* the head's layout: magic, u16 rank, u16 creator - rank, seq, tasks */
    const uint8_t head[8] = { 'P', 'H', 'C', 'K', 3, 0, 0xed, 0xff };
    assert_memory_equal(b, head, 8);
    TRUNCATIONS(b, n, blob_dec);
    phx_wdec_t d;
    phx_wdec_init(&d, b + PHX_CK_BLOB_HEAD, n - PHX_CK_BLOB_HEAD);
    phx_ck_task_head_t th;
    assert_int_equal(phx_ck_task_head_dec(&d, &th), 0);
    assert_true(th.id == 0x30001 && th.type == 2 && th.rsn == 5);
    assert_int_equal(phx_ck_task_skip(&d), 0);
    assert_int_equal(phx_wdec_left(&d), 4 + 4 + 8);
    /* a count that runs past the end is refused, not looped over */
    phx_wenc_init(&e, b, sizeof b);
    phx_ck_blob_head_enc(&e, &(phx_ck_blob_head_t){ .ntasks = 0xffffffffu });
    assert_int_equal(phx_ck_blob_scan(b, (size_t)phx_wenc_end(&e), &bi), PHX_EPROTO);
}

static int hdr_dec(const uint8_t *b, size_t n)
{
    phx_ckd_hdr_t h;
    return n > PHX_CKD_HDR ? 1 : phx_ckd_hdr_dec(b, n, &h);   /* the payload follows: no exact end */
}
static int mani_dec(const uint8_t *b, size_t n)
{
    phx_ckd_manifest_t m;
    uint64_t tag;
    size_t body;
    const uint8_t *sum;
    const char *why;
    int rc = phx_ckd_manifest_dec(b, n, &m, &tag, &body, &sum, &why);
    phx_ckd_manifest_free(&m);
    return rc;
}

static void test_ckpt_disk(void **st)
{
    (void)st;
    uint8_t b[PHX_CKD_HDR];
    phx_ckd_hdr_t h = { PHX_CKD_FILE_MAGIC, PHX_CKD_VERSION, 0xabc, 4, 2, 100, { 0 } }, hd;
    memset(h.sum, 9, 32);
    phx_ckd_hdr_enc(b, &h);
    assert_int_equal(phx_ckd_hdr_dec(b, sizeof b, &hd), 0);
    assert_true(hd.magic == h.magic && hd.version == h.version && hd.tag == h.tag && hd.epoch == h.epoch &&
                hd.rank == h.rank && hd.len == h.len);
    assert_memory_equal(hd.sum, h.sum, 32);
    assert_memory_equal(b + 1, "PHXCKPT", 7);
    TRUNCATIONS(b, PHX_CKD_HDR, hdr_dec);
    int loc[4] = { 0, 1, 1, 0 }, ranks[2] = { 0, 1 };
    phx_ckd_manifest_t m = { .epoch = 4, .size = 2, .nhome = 2, .slices = 2, .loc = loc, .nfiles = 2, .ranks = ranks };
    size_t body;
    uint8_t *mb = phx_ckd_manifest_enc(&m, 0xabc, &body);
    assert_non_null(mb);
    memset(mb + body, 3, 32);
    phx_ckd_manifest_t md;
    uint64_t tag;
    size_t bd;
    const uint8_t *sum;
    const char *why;
    assert_int_equal(phx_ckd_manifest_dec(mb, body + 32, &md, &tag, &bd, &sum, &why), 0);
    assert_true(tag == 0xabc && bd == body && sum == mb + body && md.epoch == 4 && md.size == 2 && md.nhome == 2 &&
                md.slices == 2 && md.nfiles == 2);
    assert_memory_equal(md.loc, loc, sizeof loc);
    assert_memory_equal(md.ranks, ranks, sizeof ranks);
    phx_ckd_manifest_free(&md);
    TRUNCATIONS(mb, body + 32, mani_dec);
    free(mb);
}

/* ---- message logging, runtime control ------------------------------------- */

static int round_dec(const uint8_t *b, size_t n) { uint32_t r; return phx_ml_round_dec(b, n, &r); }
static int ad_dec(const uint8_t *b, size_t n) { phx_ml_ackdets_t m; return phx_ml_ackdets_dec(b, n, &m) || !m.dets_len; }
static int exit_dec(const uint8_t *b, size_t n) { int32_t c; return phx_ctl_exit_dec(b, n, &c); }

static void test_mlog_core(void **st)
{
    (void)st;
    uint8_t b[64];
    phx_det_t d = { 0x10001, 0x20002, 1ull << 63 | 5, 6 }, dd;
    phx_wenc_t e;
    phx_wenc_init(&e, b, sizeof b);
    phx_ml_det_enc(&e, &d);
    assert_int_equal(phx_wenc_end(&e), PHX_ML_DET_LEN);
    phx_wdec_t dc;
    phx_wdec_init(&dc, b, PHX_ML_DET_LEN);
    assert_int_equal(phx_ml_det_dec(&dc, &dd), 0);
    assert_memory_equal(&dd, &d, sizeof d);
    phx_wdec_init(&dc, b, PHX_ML_DET_LEN - 1);
    assert_int_not_equal(phx_ml_det_dec(&dc, &dd), 0);

    uint32_t r;
    phx_ml_round_enc(b, 200);
    assert_int_equal(phx_ml_round_dec(b, PHX_ML_ROUND_LEN, &r), 0);
    assert_int_equal(r, 200);
    TRUNCATIONS(b, PHX_ML_ROUND_LEN, round_dec);

    phx_ml_ackdets_head(b, 3);
    memcpy(b + 2, "ackdet", 6);
    phx_ml_ackdets_t ad;
    assert_int_equal(phx_ml_ackdets_dec(b, 8, &ad), 0);
    assert_true(ad.ack == b + 2 && ad.ack_len == 3 && ad.dets == b + 5 && ad.dets_len == 3);
    for (size_t k = 0; k < 6; k++)   /* the ack cut short */
        assert_int_not_equal(ad_dec(b, k), 0);

    int32_t code;
    phx_ctl_exit_enc(b, -3);
    assert_int_equal(phx_ctl_exit_dec(b, PHX_CTL_EXIT_LEN, &code), 0);
    assert_int_equal(code, -3);
    TRUNCATIONS(b, PHX_CTL_EXIT_LEN, exit_dec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint),   cmocka_unit_test(test_a32),       cmocka_unit_test(test_ds),
        cmocka_unit_test(test_ff),       cmocka_unit_test(test_ckpt_ctl),  cmocka_unit_test(test_ckpt_blob),
        cmocka_unit_test(test_ckpt_disk), cmocka_unit_test(test_mlog_core),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

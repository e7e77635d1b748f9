/* libFuzzer entry point for every message decoder past the frame: the
 * bytes a peer or a file hands to ERA, the heartbeat detector, the
 * termination detectors, recovery=cr's control messages, message
 * logging's trailer and acks, a checkpoint blob, a checkpoint file header
 * and manifest, and the runtime's own control messages (fuzz_msg.h).
 *
 * The protocol decoders are driven through their state machines (an
 * instance sized by the param byte takes the bytes as a message from a
 * peer), so what a decoder lets through meets the code that trusts it.
 *
 * Oracles beyond the sanitizers (abort on violation): every struct
 * decoder that accepts its input re-encodes it to the identical bytes;
 * a state machine answers only with its documented codes; ERA's peek
 * agrees with its type query. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_log.h"
#include "base/phx_wire.h"
#include "core/ctl_msg.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/drain.h"
#include "ft/era/era.h"
#include "ft/era/group.h"
#include "ft/hb/hb.h"
#include "ft/mlog/msg.h"
#include "ft/mlog/scml.h"
#include "ft/termination/msg.h"
#include "ft/termination/td.h"
#include "ft/termination/td_credit.h"
#include "tests/fuzz/fuzz_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); abort(); } } while (0)

/* ---- ERA ------------------------------------------------------------------ */

static int era_send(void *ctx, int dst, const void *buf, size_t len) { return 0; }
static void era_decided(void *ctx, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *v,
                        const phx_ft_rankset_t *f, int rc) {}

static void fz_era(uint8_t param, const uint8_t *p, size_t n)
{
    phx_ft_era_peek_t pk;
    int rc = phx_ft_era_msg_peek(p, n, &pk);
    CHECK((rc == 0) == (phx_ft_era_msg_type(p, n) != 0));
    int size = 2 + param % 7, me = (param >> 3) % size, src = (me + 1) % size;
    phx_ft_era_env_t env = { .send = era_send, .decided = era_decided };
    phx_ft_era_t *e;
    if (phx_ft_era_create(&env, me, size, &e))
        abort();
    int mem[8];
    for (int i = 0; i < size; i++)
        mem[i] = i;
    phx_ft_group_t *g;
    if (phx_ft_group_create(e, 1, mem, size, &g))
        abort();
    if (param & 0x80) {   /* an agreement of its own in flight */
        phx_ft_era_value_t v;
        phx_ft_era_value_u64(&v, 5);
        CHECK(phx_ft_era_start(e, g, 1, &v, PHX_FT_ERA_MAX) == 0);
    }
    rc = phx_ft_era_on_msg(e, src, p, n);
    CHECK(rc == 0 || rc == PHX_EPROTO);
    phx_ft_era_destroy(e);
}

/* ---- heartbeat detector ------------------------------------------------------ */

static void hb_send(void *ctx, int dst, unsigned type, const void *buf, size_t len) {}

static void fz_hb(uint8_t param, const uint8_t *p, size_t n)
{
    if (!n)
        return;
    int size = 2 + param % 13, me = (param >> 4) % size, src = (me + 1 + (p[0] >> 4)) % size;
    phx_ft_hb_cfg_t cfg = { .nranks = size, .rank = me, .incarnation = 1, .delta_ns = 1000000000ull,
                            .bcast_list_max = (param & 0x40) ? -1 : 0 };
    phx_ft_hb_env_t env = { .send = hb_send };
    phx_ft_hb_t *hb;
    if (phx_ft_hb_create(&cfg, &env, &hb))
        abort();
    phx_ft_hb_start(hb, 1);
    if (src == me)
        src = (me + 1) % size;
    int rc = phx_ft_hb_on_msg(hb, src, 1 + p[0] % (PHX_FT_HB_NTYPES - 1), p + 1, n - 1, 2);
    CHECK(rc == 0 || rc == PHX_EPROTO || rc == PHX_EFENCED || rc == PHX_ENOMEM);
    phx_ft_hb_destroy(hb);
}

/* ---- termination detectors --------------------------------------------------- */

static void td_send(void *ctx, int dst, const void *m, size_t len) {}
static void td_declare(void *ctx) {}
static void td_fatal(void *ctx, int code, const char *why) {}
static void td_release(void *ctx, uint64_t token, const uint8_t *pb) {}

static void td_roundtrips(const uint8_t *p, size_t n)
{
    uint8_t out[1024];
    phx_ds_msg_t ds;
    if (!phx_ds_msg_dec(p, n, &ds)) {
        phx_ds_entry_t ent[200];
        if (ds.type == PHX_DS_M_REPLY) {
            if (ds.count > 200)
                goto skip;
            for (uint32_t i = 0; i < ds.count; i++)
                ent[i] = phx_ds_msg_entry(&ds, i);
            ds.ent = ent;
        }
        CHECK(phx_ds_msg_enc(&ds, out, sizeof out) == (long)n && !memcmp(out, p, n));
    }
skip:;
    phx_4c_msg_t fc;
    if (!phx_4c_msg_dec(p, n, &fc))
        CHECK(phx_4c_msg_enc(&fc, out, sizeof out) == (long)n && !memcmp(out, p, n));
    phx_tdc_msg_t tc;
    if (!phx_tdc_msg_dec(p, n, &tc))
        CHECK(phx_tdc_msg_enc(&tc, out, sizeof out) == (long)n && !memcmp(out, p, n));
    phx_ed_msg_t ed;
    if (!phx_ed_msg_dec(p, n, &ed))
        CHECK(phx_ed_msg_enc(&ed, out, sizeof out) == (long)n && !memcmp(out, p, n));
}

static void fz_td(uint8_t param, const uint8_t *p, size_t n)
{
    static const char *const names[] = { "4c", "edod", "hcda", "cda", "indep", "rellazy", "releager" };
    td_roundtrips(p, n);
    const phx_td_ops_t *ops = phx_td_find(names[param % 7]);
    if (!ops)
        abort();
    int size = 3 + (param >> 3) % 6, me = (param >> 6) % size, src = (me + 1) % size;
    phx_td_env_t env = { .rank = me, .size = size, .send = td_send, .declare = td_declare,
                         .fatal = td_fatal, .release = td_release };
    void *st;
    if (ops->create(&env, &st))
        abort();
    ops->start(st, me == 0);
    int rc = ops->on_ctrl(st, src, p, n);
    CHECK(rc == 0 || rc == PHX_EPROTO);
    ops->destroy(st);
}

/* ---- recovery=cr control messages ------------------------------------------ */

/* CR_DRAIN bodies (ft/ckpt/drain.h): each decoder's accepted input
 * re-encodes to itself, and feeds a drain machine (rank 0 of size, the
 * coordinator, idle) as a message from rank 1. */
static void fz_drain(int size, uint64_t id, const uint8_t *b, size_t len)
{
    phx_ck_dr_t *m;
    if (phx_ck_dr_create(size, 0, &m))
        abort();
    uint8_t dead[16] = { 0 }, lv[16] = { 0 }, o[128];
    phx_ck_dr_view_t v = { .dead = dead, .coord = 0, .idle = 1, .round = (uint32_t)(id >> 32) };
    phx_ck_dr_out_t out = { 0 };
    phx_ck_dr_req_t q;
    if (!phx_ck_dr_req_dec(b, len, &q)) {
        phx_ck_dr_req_enc(o, &q);
        CHECK(len == PHX_CK_DR_REQ_LEN && !memcmp(o, b, len));
        CHECK(phx_ck_dr_kind(b, len) == PHX_CK_DR_M_REQ);
        phx_ck_dr_on_req(m, &v, size > 1 ? 1 : 0, &out);
        CHECK(out.n <= 1 && (!out.n || out.a[0].kind == PHX_CK_DR_START));
    }
    phx_ck_dr_leave_t l;
    if (!phx_ck_dr_leave_dec(b, len, size, &l)) {
        for (size_t i = 0; i < l.ranks.n; i++)
            lv[phx_wire_a32_i32(l.ranks, i)] = 1;
        CHECK(phx_ck_dr_leave_enc(lv, size, o, sizeof o) == (long)len && !memcmp(o, b, len));
        phx_ck_dr_on_leave(m, &v, id, lv);
        phx_ck_dr_on_commit(m, id, &out);
    }
    phx_ck_dr_destroy(m);
}

static void fz_ckctl(uint8_t param, const uint8_t *p, size_t n)
{
    int size = 1 + param % 9, nloc = size * (1 + (param >> 4) % 3);
    phx_ck_ctl_t m;
    if (phx_ck_ctl_dec(p, n, &m))
        return;
    uint8_t h[PHX_CK_CTL_HEAD];
    phx_ck_ctl_enc(h, m.arg);
    CHECK(!memcmp(h, p, sizeof h) && m.len == n - PHX_CK_CTL_HEAD);
    const uint8_t *b = m.body;
    size_t len = m.len;

    phx_ck_chunk_t ch;
    if (!phx_ck_chunk_dec(b, len, &ch)) {
        uint8_t o[PHX_CK_CHUNK_HDR];
        phx_ck_chunk_enc(o, &ch);
        CHECK(!memcmp(o, b, sizeof o) && len - sizeof o <= ch.total - ch.off);
    }
    phx_ck_cack_t ca;
    if (!phx_ck_cack_dec(b, len, &ca)) {
        uint8_t o[PHX_CK_CACK_LEN];
        phx_ck_cack_enc(o, &ca);
        CHECK(len == sizeof o && !memcmp(o, b, len));
    }
    uint64_t q;
    if (!phx_ck_ready_dec(b, len, &q)) {
        uint8_t o[PHX_CK_READY_LEN];
        phx_ck_ready_enc(o, q);
        CHECK(len == sizeof o && !memcmp(o, b, len));
    }
    uint32_t inc;
    if (!phx_ck_join_dec(b, len, &inc)) {
        uint8_t o[PHX_CK_JOIN_LEN];
        phx_ck_join_enc(o, inc);
        CHECK(len == sizeof o && !memcmp(o, b, len));
    }
    phx_ck_abort_t ab;
    if (!phx_ck_abort_dec(b, len, &ab)) {
        uint8_t o[PHX_CK_ABORT_LEN];
        phx_ck_abort_enc(o, &ab);
        CHECK(len == sizeof o && !memcmp(o, b, len));
    }
    fz_drain(size, m.arg, b, len);
    int buddy[16], loc[48];
    uint32_t incs[16];
    uint8_t o[512];
    phx_ck_begin_t bg;
    if (!phx_ck_begin_dec(b, len, size, nloc, &bg)) {
        for (int i = 0; i < size; i++)
            buddy[i] = phx_wire_a32_i32(bg.buddies, (size_t)i);
        for (size_t i = 0; i < bg.table.n; i++)
            loc[i] = phx_wire_a32_i32(bg.table, i);
        phx_ck_begin_t re = { .buddy = buddy, .loc = bg.table.n ? loc : NULL };
        CHECK(phx_ck_begin_enc(&re, size, nloc, o, sizeof o) == (long)len && !memcmp(o, b, len));
    }
    phx_ck_eset_t es;
    if (!phx_ck_eset_dec(b, len, size, nloc, &es)) {
        phx_ck_eset_t re = es;
        if (es.joins) {
            for (int i = 0; i < size; i++) {
                incs[i] = phx_wire_a32_u32(es.inc, (size_t)i);
                buddy[i] = phx_wire_a32_i32(es.buddies, (size_t)i);
            }
            for (int i = 0; i < nloc; i++)
                loc[i] = phx_wire_a32_i32(es.table, (size_t)i);
            re.incs = incs;
            re.loc = loc;
            re.buddy = buddy;
        }
        CHECK(phx_ck_eset_enc(&re, size, nloc, o, sizeof o) == (long)len && !memcmp(o, b, len));
    }
}

/* ---- message logging --------------------------------------------------------- */

static void fz_mlog(uint8_t param, const uint8_t *p, size_t n)
{
    phx_ml_cfg_t cfg = { .rank = 0, .n = 4, .inc = 1, .nq = 2, .qcap = 64, .pessimistic = param & 1 };
    phx_ml_t *ml = phx_ml_create(&cfg);
    if (!ml)
        abort();
    static uint8_t ack[PHX_ML_ACK_MAX];
    int from = 1 + (param >> 1) % 3;
    long k = phx_ml_pb_store(ml, from, p, n, (param & 2) ? ack : NULL);
    CHECK(k >= 0 || k == PHX_EPROTO || k == PHX_ENOMEM || k == PHX_ERANGE);
    int rc = phx_ml_on_ack(ml, p, n);
    CHECK(rc == 0 || rc < 0);
    phx_ml_ackdets_t ad;
    if (!phx_ml_ackdets_dec(p, n, &ad)) {
        uint8_t h[PHX_ML_ACKDETS_HEAD];
        phx_ml_ackdets_head(h, ad.ack_len);
        CHECK(!memcmp(h, p, sizeof h) && PHX_ML_ACKDETS_HEAD + ad.ack_len + ad.dets_len == n);
        (void)phx_ml_pb_store(ml, from, ad.dets, ad.dets_len, NULL);
    }
    uint32_t round;
    if (!phx_ml_round_dec(p, n, &round)) {
        uint8_t o[PHX_ML_ROUND_LEN];
        phx_ml_round_enc(o, round);
        CHECK(n == sizeof o && !memcmp(o, p, n));
    }
    phx_wdec_t d;
    phx_wdec_init(&d, p, n);
    phx_det_t det;
    while (phx_wdec_left(&d) >= PHX_ML_DET_LEN && !phx_ml_det_dec(&d, &det)) {
        uint8_t o[PHX_ML_DET_LEN];
        phx_wenc_t e;
        phx_wenc_init(&e, o, sizeof o);
        phx_ml_det_enc(&e, &det);
        CHECK(!memcmp(o, d.p - sizeof o, sizeof o));
    }
    phx_ml_destroy(ml);
}

/* ---- checkpoint blob, disk -------------------------------------------------- */

static void fz_blob(uint8_t param, const uint8_t *p, size_t n)
{
    phx_ck_blob_info_t bi;
    if (phx_ck_blob_scan(p, n, &bi))
        return;
    phx_ck_blob_head_t h;
    CHECK(!phx_ck_blob_head_get(p, n, &h) && h.seq == bi.head.seq && h.ntasks == bi.head.ntasks);
    uint8_t o[PHX_CK_BLOB_HEAD];
    phx_wenc_t e;
    phx_wenc_init(&e, o, sizeof o);
    phx_ck_blob_head_enc(&e, &h);
    CHECK(!memcmp(o, p, sizeof o));
}

static void fz_disk(uint8_t param, const uint8_t *p, size_t n)
{
    phx_ckd_hdr_t h;
    if (!phx_ckd_hdr_dec(p, n, &h)) {
        uint8_t o[PHX_CKD_HDR];
        phx_ckd_hdr_enc(o, &h);
        CHECK(!memcmp(o, p, sizeof o));
    }
    phx_ckd_manifest_t m;
    uint64_t tag;
    size_t body;
    const uint8_t *sum;
    const char *why;
    int rc = phx_ckd_manifest_dec(p, n, &m, &tag, &body, &sum, &why);
    CHECK(rc == 0 || ((rc == PHX_EPROTO || rc == PHX_ENOMEM) && why));
    if (rc == 0) {
        CHECK(body + 32 == n && sum == p + body);
        size_t b2;
        uint8_t *re = phx_ckd_manifest_enc(&m, tag, &b2);
        CHECK(re && b2 == body && !memcmp(re, p, body));
        free(re);
        phx_ckd_manifest_free(&m);
    }
}

static void fz_core(uint8_t param, const uint8_t *p, size_t n)
{
    int32_t code;
    if (!phx_ctl_exit_dec(p, n, &code)) {
        uint8_t o[PHX_CTL_EXIT_LEN];
        phx_ctl_exit_enc(o, code);
        CHECK(n == sizeof o && !memcmp(o, p, n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {   /* rejections are expected by the thousand */
        phx_log_set_level(PHX_LOG_ERROR);
        quiet = 1;
    }
    if (size < 2)
        return 0;
    uint8_t param = data[1];
    size_t n = size - 2;
    /* a copy of exactly n bytes, so ASan sees any overread */
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data + 2, n);
    switch (data[0] % FZ_NTARGETS) {
    case FZ_ERA: fz_era(param, p, n); break;
    case FZ_HB: fz_hb(param, p, n); break;
    case FZ_TD: fz_td(param, p, n); break;
    case FZ_CKCTL: fz_ckctl(param, p, n); break;
    case FZ_MLOG: fz_mlog(param, p, n); break;
    case FZ_BLOB: fz_blob(param, p, n); break;
    case FZ_DISK: fz_disk(param, p, n); break;
    case FZ_CORE: fz_core(param, p, n); break;
    }
    free(p);
    return 0;
}

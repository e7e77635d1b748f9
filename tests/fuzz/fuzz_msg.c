/* libFuzzer entry point for every message decoder past the frame: the
 * bytes a peer or a file hands to ERA, the heartbeat detector, the
 * termination detectors, recovery=cr's control messages, message
 * logging's trailer and acks, a checkpoint blob, a checkpoint file header
 * and manifest, the runtime's own control messages, and GLB's protocol
 * messages and its glue's task messages (fuzz_msg.h).
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
#include "ext/glb/glb_wire.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/drain.h"
#include "ft/era/era.h"
#include "ft/era/group.h"
#include "ft/glb/glb_sm.h"
#include "ft/glb/glb_vec.h"
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

/* ---- GLB: the protocol machine and the glue's task messages ------------------ */

static void *gb_new(void *app) { return phx_glb_vec_new(1); }
static void gb_free(void *app, void *b) { phx_glb_vec_free(b); }
static void gb_init(void *app, void *b, int rank, int size)
{
    uint8_t v = rank ? 4 : 0;
    phx_glb_vec_push(b, &v);
}
static int gb_process(void *app, void *bb, int n, uint64_t *res)
{
    phx_glb_vec_t *b = bb;
    while (n-- > 0 && b->n) {
        uint8_t v = *(uint8_t *)phx_glb_vec_at(b, --b->n);
        res[0]++;
        if (v++ < 6) {  /* a peer's loot may hold any depth: 6 and up are leaves */
            phx_glb_vec_push(b, &v);
            phx_glb_vec_push(b, &v);
        }
    }
    return b->n > 0;
}
static void *gb_split(void *app, void *bb)
{
    phx_glb_vec_t *b = bb;
    return b->n < 2 ? NULL : phx_glb_vec_take_front(b, b->n / 2);
}
static void gb_merge(void *app, void *b, void *l) { phx_glb_vec_merge(b, l); }
static int gb_empty(void *app, const void *b) { return ((const phx_glb_vec_t *)b)->n == 0; }
static size_t gb_psize(void *app, const void *b) { return 4 + ((const phx_glb_vec_t *)b)->n; }
static void gb_enc(const void *item, phx_wenc_t *e) { phx_wenc_u8(e, *(const uint8_t *)item); }
static int gb_dec(void *item, phx_wdec_t *d) { *(uint8_t *)item = phx_wdec_u8(d); return 0; }
static void gb_pack(void *app, const void *b, phx_wenc_t *e) { phx_glb_vec_pack(b, e, gb_enc); }
static void *gb_unpack(void *app, phx_wdec_t *d) { return phx_glb_vec_unpack(d, 1, 1, gb_dec); }
static void gb_reduce(void *app, uint64_t *acc, const uint64_t *r) { acc[0] += r[0]; }

const phx_glb_ops_t phx_fuzz_glb_ops = {
    .result_words = 1, .bag_new = gb_new, .bag_free = gb_free, .bag_init = gb_init, .process = gb_process,
    .split = gb_split, .merge = gb_merge, .is_empty = gb_empty, .pack_size = gb_psize, .pack = gb_pack,
    .unpack = gb_unpack, .reduce = gb_reduce,
};

typedef struct gb_io { int me, size; } gb_io_t;

/* The machine's answers: only to another node of the job, never empty. */
static void gb_send(void *ctx, int dst, const uint8_t *buf, size_t len)
{
    gb_io_t *io = ctx;
    CHECK(dst >= 0 && dst < io->size && dst != io->me && len >= 1);
}
static void gb_finish(void *ctx, const uint64_t *r) {}
static void gb_abort(void *ctx, const char *why) { CHECK(!strncmp(why, "unrecoverable: ", 15)); }

static void glb_glue(uint8_t param, const uint8_t *p, size_t n)
{
    uint64_t tids[PHX_GLB_MAXP], t0;
    uint8_t o[PHX_GLB_INIT_LEN(PHX_GLB_MAXP)];
    int sizes[2] = { 1 + param % PHX_GLB_MAXP, n % 8 ? 0 : (int)(n / 8) - 1 };
    for (int i = 0; i < 2; i++)
        if (!phx_glb_init_dec(p, n, sizes[i], tids, &t0))
            CHECK(phx_glb_init_enc(tids, sizes[i], t0, o, sizeof o) == (long)n && !memcmp(o, p, n));
    int64_t pid;
    if (!phx_glb_kill_dec(p, n, &pid)) {
        phx_glb_kill_enc(o, pid);
        CHECK(n == PHX_GLB_KILL_LEN && !memcmp(o, p, n));
    }
    uint64_t tid;
    if (!phx_glb_spawn_dec(p, n, &tid)) {
        phx_glb_spawn_enc(o, tid);
        CHECK(n == PHX_GLB_SPAWN_LEN && !memcmp(o, p, n));
    }
    /* The bag codec (loot and backups carry it): an exact accept re-packs
     * to the same bytes. */
    phx_wdec_t d;
    phx_wdec_init(&d, p, n);
    phx_glb_vec_t *v = phx_glb_vec_unpack(&d, 1, 1, gb_dec);
    if (v && !phx_wdec_end(&d, 1)) {
        uint8_t *b = malloc(n ? n : 1);
        if (!b)
            abort();
        phx_wenc_t e;
        phx_wenc_init(&e, b, n);
        phx_glb_vec_pack(v, &e, gb_enc);
        CHECK(phx_wenc_end(&e) == (ptrdiff_t)n && !memcmp(b, p, n));
        free(b);
    }
    phx_glb_vec_free(v);
}

/* One node's machine (param: PHX_FZ_GLB_PARAM) takes the bytes as a
 * message from its ring predecessor, which then dies (so a backup it
 * stored is adopted: adopt() decodes it), or as a run of chunks from any
 * node and failure notices; it steps between them, so the answers and
 * the adoption meet what the decoder let through. */
static void fz_glb(uint8_t param, const uint8_t *p, size_t n)
{
    glb_glue(param, p, n);
    int size = 2 + (param & 7), me = ((param >> 3) & 7) % size, pred = (me + size - 1) % size;
    phx_glb_cfg_t cfg = { .ft = !!(param & 0x40), .n = 16, .k = 4, .timeout_ms = 10 };
    gb_io_t ctx = { me, size };
    phx_glb_io_t io = { .ctx = &ctx, .send = gb_send, .finish = gb_finish, .abort = gb_abort };
    phx_glb_sm_t *s = phx_glb_sm_new(&cfg, &phx_fuzz_glb_ops, NULL, me, size, &io, 1);
    if (!s)
        abort();
    uint64_t now = 1000;
    phx_glb_sm_start(s, now);
    if (!(param & 0x80)) {
        phx_glb_sm_recv(s, pred, p, n, now += 1000);
        phx_glb_sm_step(s, now += 1000);
        phx_glb_sm_dead(s, pred, now += 1000);
    }
    else {
        phx_wdec_t d;
        phx_wdec_init(&d, p, n);
        for (int i = 0; i < 64 && phx_wdec_left(&d); i++) {
            uint8_t src = phx_wdec_u8(&d);
            if (src & 0x80) {
                phx_glb_sm_dead(s, (src & 0x7f) % size, now += 1000);
                continue;
            }
            size_t len = phx_wdec_u16(&d);
            const uint8_t *m = phx_wdec_take(&d, len);
            if (!m)
                break;
            phx_glb_sm_recv(s, src % size, m, len, now += 1000);
            phx_glb_sm_step(s, now += 1000);
        }
    }
    /* A few steps past every timeout (10 ms): backups, steals, waves and
     * got queries go out; a fuzzed bag is not worked off (n = 16 a step). */
    for (int i = 0; i < 8 && phx_glb_sm_step(s, now += 20000000); i++) {}
    phx_glb_sm_free(s);
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
    case FZ_GLB: fz_glb(param, p, n); break;
    }
    free(p);
    return 0;
}

/* Seed inputs for fuzz_msg (fuzz_msg.h), all from the real encoders: ERA
 * and heartbeat messages captured from engines talking to each other, the
 * termination detectors' messages from detectors running a small job, GLB's
 * from three machines stealing, backing up and draining, and each struct
 * encoder's output for the other families. */
#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_wire.h"
#include "core/ctl_msg.h"
#include "ext/glb/glb_wire.h"
#include "ft/ckpt/ckpt_msg.h"
#include "ft/ckpt/drain.h"
#include "ft/era/era.h"
#include "ft/era/group.h"
#include "ft/glb/glb_sm.h"
#include "ft/hb/hb.h"
#include "ft/mlog/msg.h"
#include "ft/mlog/scml.h"
#include "ft/termination/msg.h"
#include "ft/termination/td.h"
#include "ft/termination/td_credit.h"
#include "tests/fuzz/fuzz_msg.h"

typedef void (*emit_fn)(void *ctx, const uint8_t *buf, size_t len);

static void put(emit_fn emit, void *ctx, int target, uint8_t param, const void *b, size_t n)
{
    uint8_t *s = malloc(n + 2);
    if (!s)
        abort();
    s[0] = (uint8_t)target;
    s[1] = param;
    if (n)
        memcpy(s + 2, b, n);
    emit(ctx, s, n + 2);
    free(s);
}

/* A queue of captured messages between a few instances. */
typedef struct cap {
    int src, dst;
    unsigned type;
    size_t len;
    uint8_t b[4096];
} cap_t;
static cap_t q[256];
static int nq, qhead, from;

static void push(int dst, unsigned type, const void *buf, size_t len)
{
    if (nq == (int)(sizeof q / sizeof q[0]) || len > sizeof q[0].b)
        return;
    q[nq] = (cap_t){ .src = from, .dst = dst, .type = type, .len = len };
    memcpy(q[nq].b, buf, len);
    nq++;
}

/* ---- ERA: three engines agree, then one revokes -------------------------------- */

static int era_send(void *ctx, int dst, const void *buf, size_t len)
{
    push(dst, 0, buf, len);
    return 0;
}
static void era_decided(void *ctx, uint64_t gid, uint64_t aid, const phx_ft_era_value_t *v,
                        const phx_ft_rankset_t *f, int rc) {}

static void seeds_era(emit_fn emit, void *ctx)
{
    enum { N = 3 };
    phx_ft_era_env_t env = { .send = era_send, .decided = era_decided };
    phx_ft_era_t *e[N];
    phx_ft_group_t *g[N];
    int mem[N] = { 0, 1, 2 };
    nq = qhead = 0;
    for (int r = 0; r < N; r++)
        if (phx_ft_era_create(&env, r, N, &e[r]) || phx_ft_group_create(e[r], 1, mem, N, &g[r]))
            abort();
    phx_ft_era_value_t v;
    for (int r = 0; r < N; r++) {
        from = r;
        phx_ft_era_value_u64(&v, (uint64_t)r + 5);
        phx_ft_era_start(e[r], g[r], 1, &v, PHX_FT_ERA_MAX);
    }
    for (; qhead < nq; qhead++) {
        from = q[qhead].dst;
        phx_ft_era_on_msg(e[q[qhead].dst], q[qhead].src, q[qhead].b, q[qhead].len);
    }
    from = 1;
    phx_ft_ulfm_revoke(e[1], g[1]);
    for (int i = 0; i < nq; i++)   /* as the replay's engine sees it: own agreement 1 in flight */
        put(emit, ctx, FZ_ERA, (uint8_t)(0x80 | (q[i].dst << 3) | 1), q[i].b, q[i].len);
    for (int r = 0; r < N; r++)
        phx_ft_era_destroy(e[r]);
}

/* ---- heartbeats: four detectors, then rank 3 falls silent ------------------------ */

static void hb_send(void *ctx, int dst, unsigned type, const void *buf, size_t len)
{
    push(dst, type, buf, len);
}

static void seeds_hb(emit_fn emit, void *ctx)
{
    enum { N = 4 };
    const uint64_t delta = 1000000000ull;
    phx_ft_hb_t *hb[N];
    phx_ft_hb_env_t env = { .send = hb_send };
    nq = qhead = 0;
    for (int r = 0; r < N; r++) {
        phx_ft_hb_cfg_t cfg = { .nranks = N, .rank = r, .incarnation = 1, .delta_ns = delta };
        if (phx_ft_hb_create(&cfg, &env, &hb[r]))
            abort();
        from = r;
        phx_ft_hb_start(hb[r], 1);
    }
    for (uint64_t t = delta / 10; t <= 3 * delta; t += delta / 10) {
        for (int r = 0; r < N - (t > delta); r++) {   /* rank 3 stops after one delta */
            from = r;
            phx_ft_hb_tick(hb[r], t);
        }
        for (; qhead < nq; qhead++) {
            if (q[qhead].dst == N - 1 && t > delta)
                continue;
            from = q[qhead].dst;
            phx_ft_hb_on_msg(hb[q[qhead].dst], q[qhead].src, q[qhead].type, q[qhead].b, q[qhead].len, t);
        }
    }
    /* fz_hb: size = 2 + param % 13, me = (param >> 4) % size, type = 1 + b0 % 5,
     * src = (me + 1 + (b0 >> 4)) % size: pick param and b0 to match. */
    int seen[PHX_FT_HB_NTYPES] = { 0 };
    for (int i = 0; i < nq; i++) {
        if (seen[q[i].type]++ > 6)
            continue;
        int param = -1, b0 = -1;
        for (int x = 0; x < 256 && param < 0; x++)
            if (x % 13 == N - 2 && (x >> 4) % N == q[i].dst)
                param = x;
        int off = ((q[i].src - q[i].dst - 1) % N + N) % N;
        for (int x = 0; x < 256 && b0 < 0; x++)
            if (1 + x % 5 == (int)q[i].type && ((x >> 4) % N) == off)
                b0 = x;
        if (param < 0 || b0 < 0)
            continue;
        uint8_t b[4097];
        b[0] = (uint8_t)b0;
        memcpy(b + 1, q[i].b, q[i].len);
        put(emit, ctx, FZ_HB, (uint8_t)param, b, q[i].len + 1);
    }
    for (int r = 0; r < N; r++)
        phx_ft_hb_destroy(hb[r]);
}

/* ---- termination detectors -------------------------------------------------- */

static void td_send(void *ctx, int dst, const void *m, size_t len) { push(dst, 0, m, len); }
static void td_declare(void *ctx) {}
static void td_fatal(void *ctx, int code, const char *why) {}
static void td_release(void *ctx, uint64_t token, const uint8_t *pb) {}

/* Each detector on three nodes: rank 0 sends to 1 and 2, they finish, a
 * node fails (for the fault-tolerant ones); every control message goes in. */
static void seeds_td(emit_fn emit, void *ctx)
{
    static const char *const names[] = { "4c", "edod", "hcda", "cda", "indep", "rellazy", "releager" };
    enum { N = 3 };
    for (int k = 0; k < 7; k++) {
        const phx_td_ops_t *ops = phx_td_find(names[k]);
        void *st[N];
        nq = qhead = 0;
        for (int r = 0; r < N; r++) {
            phx_td_env_t env = { .rank = r, .size = N, .send = td_send, .declare = td_declare,
                                 .fatal = td_fatal, .release = td_release };
            if (!ops || ops->create(&env, &st[r]))
                abort();
        }
        for (int r = 0; r < N; r++) {
            from = r;
            ops->start(st[r], r == 0);
        }
        uint8_t pb[PHX_TD_PB_MAX] = { 0 };
        from = 0;
        for (int d = 1; d < N; d++)
            if (ops->on_send(st[0], d, (uint64_t)d, pb) == 0) {
                from = d;
                ops->on_recv(st[d], 0, pb);
                ops->on_processed(st[d], 0);
                ops->on_idle(st[d]);
                from = 0;
            }
        from = 0;
        ops->on_idle(st[0]);
        if (ops->fault_tolerant)
            for (int r = 0; r < N - 1; r++) {
                from = r;
                ops->on_failure(st[r], N - 1);
            }
        for (int round = 0; round < 64 && qhead < nq; round++)
            for (; qhead < nq; qhead++) {
                from = q[qhead].dst;
                if (!ops->fault_tolerant || q[qhead].dst != N - 1)
                    ops->on_ctrl(st[q[qhead].dst], q[qhead].src, q[qhead].b, q[qhead].len);
            }
        /* fz_td: names[param % 7], size = 3 + (param >> 3) % 6, me = (param >> 6) % size */
        for (int i = 0; i < nq && i < 24; i++)
            put(emit, ctx, FZ_TD, (uint8_t)(k | (q[i].dst << 6)), q[i].b, q[i].len);
        for (int r = 0; r < N; r++)
            ops->destroy(st[r]);
    }
    /* every DS message type, a REPLY with entries among them */
    uint8_t b[256];
    phx_ds_entry_t ent[2] = { { 1, 0 }, { 2, 1 } };
    phx_ds_msg_t ds[] = {
        { .type = PHX_DS_M_ACK, .flags = PHX_DS_ACK_DISENGAGE, .count = 3 },
        { .type = PHX_DS_M_PGC, .rank = 2, .seq = 7 },
        { .type = PHX_DS_M_QUERY, .rank = 2, .gparent = -1 },
        { .type = PHX_DS_M_REPLY, .rank = 2, .debt = 1, .count = 2, .ent = ent },
        { .type = PHX_DS_M_INTERIOR, .rank = 1, .seq = 3 },
        { .type = PHX_DS_M_EXTERIOR, .rank = 1 },
        { .type = PHX_DS_M_NOTIFY, .rank = 0, .xseq = 4 },
        { .type = PHX_DS_M_ANSWER, .xseq = 4, .engaged = 1, .unpaired = 1 },
        { .type = PHX_DS_M_FENCE, .seq = 7 },
        { .type = PHX_DS_M_ANNOUNCE },
    };
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        long n = phx_ds_msg_enc(&ds[i], b, sizeof b);
        put(emit, ctx, FZ_TD, 6 | (1 << 6), b, (size_t)n);
    }
}

/* ---- recovery=cr control ------------------------------------------------------ */

static void ctl_put(emit_fn emit, void *ctx, uint8_t param, uint64_t arg, const void *body, size_t len)
{
    uint8_t b[1024];
    phx_ck_ctl_enc(b, arg);
    if (len)    /* body may be NULL then */
        memcpy(b + PHX_CK_CTL_HEAD, body, len);
    put(emit, ctx, FZ_CKCTL, param, b, PHX_CK_CTL_HEAD + len);
}

static void seeds_ckctl(emit_fn emit, void *ctx)
{
    /* fz_ckctl: size = 1 + param % 9, nloc = size * (1 + (param >> 4) % 3) */
    enum { N = 4, NLOC = 8 };
    const uint8_t param = (N - 1) | (1 << 4);
    uint64_t id = phx_ck_id(1, 3);
    uint8_t b[512];
    phx_ck_chunk_enc(b, &(phx_ck_chunk_t){ .kind = 0, .key = 2, .epoch = 3, .total = 100, .off = 40 });
    memset(b + PHX_CK_CHUNK_HDR, 0xab, 20);
    ctl_put(emit, ctx, param, id, b, PHX_CK_CHUNK_HDR + 20);
    phx_ck_cack_enc(b, &(phx_ck_cack_t){ .kind = 1, .key = 2, .got = 60 });
    ctl_put(emit, ctx, param, id, b, PHX_CK_CACK_LEN);
    phx_ck_ready_enc(b, 9);
    ctl_put(emit, ctx, param, id, b, PHX_CK_READY_LEN);
    phx_ck_join_enc(b, 2);
    ctl_put(emit, ctx, param, 3, b, PHX_CK_JOIN_LEN);
    phx_ck_abort_enc(b, &(phx_ck_abort_t){ 1, 2 });
    ctl_put(emit, ctx, param, 3, b, PHX_CK_ABORT_LEN);
    phx_ck_dr_req_enc(b, &(phx_ck_dr_req_t){ .rank = 1, .why = PHX_CK_DR_WHY_TERM });
    ctl_put(emit, ctx, param, 0, b, PHX_CK_DR_REQ_LEN);
    uint8_t lv[N] = { 0, 1, 0, 1 };
    long dl = phx_ck_dr_leave_enc(lv, N, b, sizeof b);
    ctl_put(emit, ctx, param, id, b, (size_t)dl);
    int buddy[N] = { 1, 2, 3, 0 }, loc[NLOC] = { 0, 1, 2, 3, 0, 1, 2, 3 };
    long n = phx_ck_begin_enc(&(phx_ck_begin_t){ .buddy = buddy }, N, NLOC, b, sizeof b);
    ctl_put(emit, ctx, param, id, b, (size_t)n);
    n = phx_ck_begin_enc(&(phx_ck_begin_t){ .buddy = buddy, .loc = loc }, N, NLOC, b, sizeof b);
    ctl_put(emit, ctx, param, id, b, (size_t)n);
    uint8_t dead[N] = { 0, 0, 1, 0 };
    uint32_t incs[N] = { 0, 0, 2, 0 };
    n = phx_ck_eset_enc(&(phx_ck_eset_t){ .epoch = 3, .dead = dead, .flags = PHX_CK_D_DISK }, N, NLOC, b, sizeof b);
    ctl_put(emit, ctx, param, 1, b, (size_t)n);
    n = phx_ck_eset_enc(&(phx_ck_eset_t){ .epoch = 3, .dead = dead, .joins = 1, .view = 2, .incs = incs,
                                          .loc = loc, .buddy = buddy }, N, NLOC, b, sizeof b);
    ctl_put(emit, ctx, param, 1, b, (size_t)n);
    ctl_put(emit, ctx, param, id, NULL, 0);   /* MARK, COMMIT, GO: the head alone */
}

/* ---- message logging ------------------------------------------------------------- */

static void seeds_mlog(emit_fn emit, void *ctx)
{
    phx_ml_cfg_t cfg = { .rank = 1, .n = 4, .inc = 1, .nq = 2, .qcap = 64 };
    phx_ml_t *a = phx_ml_create(&cfg);
    cfg.rank = 0;
    phx_ml_t *b = phx_ml_create(&cfg);
    if (!a || !b)
        abort();
    for (int i = 0; i < 6; i++) {
        phx_det_t d = { .sender = 0x10001 + (uint64_t)i, .receiver = 0x20001, .ssn = (uint64_t)i + 1,
                        .rsn = (uint64_t)i + 1 };
        if (i == 4)
            d.ssn |= 1ull << 63;   /* a spawn det */
        phx_detq_add(phx_ml_queue(a, i & 1), &d);
    }
    static uint8_t pb[8192], ack[2 + PHX_ML_ACK_MAX];
    long n = phx_ml_pb_encode(a, pb, sizeof pb);
    /* fz_mlog: from = 1 + (param >> 1) % 3 */
    put(emit, ctx, FZ_MLOG, 0, pb, (size_t)n);
    put(emit, ctx, FZ_MLOG, 2 | 1, pb, (size_t)n);
    long k = phx_ml_pb_store(b, 1, pb, (size_t)n, ack + PHX_ML_ACKDETS_HEAD);
    if (k > 0) {
        put(emit, ctx, FZ_MLOG, 0, ack + PHX_ML_ACKDETS_HEAD, (size_t)k);
        phx_ml_ackdets_head(ack, (size_t)k);
        uint8_t *both = malloc(PHX_ML_ACKDETS_HEAD + (size_t)k + (size_t)n);
        memcpy(both, ack, PHX_ML_ACKDETS_HEAD + (size_t)k);
        memcpy(both + PHX_ML_ACKDETS_HEAD + k, pb, (size_t)n);
        put(emit, ctx, FZ_MLOG, 0, both, PHX_ML_ACKDETS_HEAD + (size_t)k + (size_t)n);
        free(both);
    }
    uint8_t r[PHX_ML_ROUND_LEN];
    phx_ml_round_enc(r, 2);
    put(emit, ctx, FZ_MLOG, 0, r, sizeof r);
    uint8_t dets[3 * PHX_ML_DET_LEN];
    phx_wenc_t e;
    phx_wenc_init(&e, dets, sizeof dets);
    for (int i = 0; i < 3; i++)
        phx_ml_det_enc(&e, &(phx_det_t){ 0x10001, 0x20001 + (uint64_t)i, 1, 2 });
    put(emit, ctx, FZ_MLOG, 0, dets, sizeof dets);
    phx_ml_destroy(a);
    phx_ml_destroy(b);
}

/* ---- checkpoint blob and files ---------------------------------------------- */

static void seeds_blob(emit_fn emit, void *ctx)
{
    static uint8_t buf[4096];
    for (int v = 0; v < 3; v++) {
        phx_wenc_t e;
        phx_wenc_init(&e, buf, sizeof buf);
        uint32_t nt = (uint32_t)v;
        phx_ck_blob_head_enc(&e, &(phx_ck_blob_head_t){ .rank = 2, .creator = (uint16_t)(v == 2 ? 0xfff0 : 2),
                                                        .seq = 17, .ntasks = nt });
        const char body[] = "state";
        for (uint32_t t = 0; t < nt; t++) {
            phx_ck_task_head_enc(&e, &(phx_ck_task_head_t){ .id = 0x20001 + t, .type = 0, .rsn = 4 });
            phx_wenc_u32(&e, 1);   /* out_ssn: one pair */
            phx_wenc_u64(&e, 0x30001);
            phx_wenc_u64(&e, 2);
            phx_wenc_u32(&e, 0);   /* in_ssn: none */
            phx_wenc_u32(&e, sizeof body);
            phx_wenc_bytes(&e, body, sizeof body);
            phx_wenc_u32(&e, 1);   /* held back */
            phx_ck_msgrec_enc(&e, &(phx_ck_msgrec_t){ .kind = 1, .type = 0, .src = 0x30001, .dst = 0x20001 + t,
                                                      .ssn = 3, .tag = 0, .len = 4, .data = "abcd" });
        }
        phx_wenc_u32(&e, 1);       /* queued */
        phx_ck_msgrec_enc(&e, &(phx_ck_msgrec_t){ .kind = 2, .type = 1, .src = 0x10001, .dst = 0x20002,
                                                  .ssn = 1, .tag = 9, .len = 0, .data = NULL });
        phx_wenc_u32(&e, 2);       /* finished */
        phx_wenc_u64(&e, 0x20009);
        phx_wenc_u64(&e, 0x2000a);
        put(emit, ctx, FZ_BLOB, 0, buf, (size_t)phx_wenc_end(&e));
    }
}

static void seeds_disk(emit_fn emit, void *ctx)
{
    uint8_t h[PHX_CKD_HDR + 8];
    phx_ckd_hdr_t hd = { .magic = PHX_CKD_FILE_MAGIC, .version = PHX_CKD_VERSION, .tag = 0x1234, .epoch = 3,
                         .rank = 1, .len = 8 };
    memset(hd.sum, 0x5a, sizeof hd.sum);
    phx_ckd_hdr_enc(h, &hd);
    memset(h + PHX_CKD_HDR, 7, 8);
    put(emit, ctx, FZ_DISK, 0, h, sizeof h);
    int loc[8] = { 0, 1, 2, 3, 0, 1, 2, 3 }, ranks[3] = { 0, 1, 3 };
    phx_ckd_manifest_t m = { .epoch = 3, .size = 4, .nhome = 4, .slices = 2, .loc = loc, .nfiles = 3,
                             .ranks = ranks };
    size_t body;
    uint8_t *b = phx_ckd_manifest_enc(&m, 0x1234, &body);
    if (!b)
        abort();
    memset(b + body, 0x5a, 32);
    put(emit, ctx, FZ_DISK, 0, b, body + 32);
    free(b);
}

static void seeds_core(emit_fn emit, void *ctx)
{
    uint8_t b[PHX_CTL_EXIT_LEN];
    phx_ctl_exit_enc(b, 3);
    put(emit, ctx, FZ_CORE, 0, b, sizeof b);
}

/* ---- GLB: three machines (ft) steal and back up, then rank 2 drains ------------ */

static int glb_from;
static void glb_send(void *ctx, int dst, const uint8_t *buf, size_t len)
{
    from = glb_from;
    push(dst, 0, buf, len);
}
static void glb_finish(void *ctx, const uint64_t *r) {}
static void glb_abort(void *ctx, const char *why) {}

/* A chunk of FZ_GLB's chunked input: [src][u16 len][bytes]. */
static size_t glb_chunk(uint8_t *out, size_t cap, int src, const uint8_t *b, size_t len)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, cap);
    phx_wenc_u8(&e, (uint8_t)src);
    phx_wenc_u16(&e, (uint16_t)len);
    phx_wenc_bytes(&e, b, len);
    ptrdiff_t n = phx_wenc_end(&e);
    return n < 0 ? 0 : (size_t)n;
}

static void seeds_glb(emit_fn emit, void *ctx)
{
    enum { N = 3 };
    uint8_t b[8192];
    uint64_t tids[N] = { 0x100000001ull, 0x200000001ull, 0x300000001ull };
    long k = phx_glb_init_enc(tids, N, 7, b, sizeof b);
    put(emit, ctx, FZ_GLB, N - 1, b, (size_t)k);   /* param % 64 + 1 = N: T_INIT's size */
    phx_glb_kill_enc(b, 4242);
    put(emit, ctx, FZ_GLB, 0, b, PHX_GLB_KILL_LEN);
    phx_glb_spawn_enc(b, 0x400000002ull);
    put(emit, ctx, FZ_GLB, 0, b, PHX_GLB_SPAWN_LEN);

    phx_glb_cfg_t cfg = { .ft = 1, .n = 16, .k = 4, .timeout_ms = 10 };
    phx_glb_io_t io = { .send = glb_send, .finish = glb_finish, .abort = glb_abort };
    phx_glb_sm_t *m[N];
    nq = qhead = 0;
    uint64_t now = 1000;
    for (int r = 0; r < N; r++)
        if (!(m[r] = phx_glb_sm_new(&cfg, &phx_fuzz_glb_ops, NULL, r, N, &io, 1)))
            abort();
    for (int r = 0; r < N; r++) {
        glb_from = r;
        phx_glb_sm_start(m[r], now);
    }
    for (int round = 0; round < 400 && nq < (int)(sizeof q / sizeof q[0]); round++) {
        now += 1000000;
        for (; qhead < nq; qhead++) {
            glb_from = q[qhead].dst;
            phx_glb_sm_recv(m[q[qhead].dst], q[qhead].src, q[qhead].b, q[qhead].len, now);
        }
        if (round == 40) {
            glb_from = 2;
            (void)phx_glb_sm_leave(m[2], now);   /* final backups, then M_BYE */
        }
        for (int r = 0; r < N; r++) {
            glb_from = r;
            phx_glb_sm_step(m[r], now);
        }
    }
    /* Each message alone, as a chunk from its sender (and, from the ring
     * predecessor, plain: then the sender dies and its backup is adopted),
     * and each receiver's whole stream in order. */
    size_t at[N] = { 0 };
    static uint8_t stream[N][8192];
    for (int i = 0; i < nq; i++) {
        int d = q[i].dst, s = q[i].src;
        size_t c = glb_chunk(b, sizeof b, s, q[i].b, q[i].len);
        if (c)
            put(emit, ctx, FZ_GLB, PHX_FZ_GLB_PARAM(N, d, 1, 1), b, c);
        if (s == (d + N - 1) % N)
            put(emit, ctx, FZ_GLB, PHX_FZ_GLB_PARAM(N, d, 1, 0), q[i].b, q[i].len);
        at[d] += glb_chunk(stream[d] + at[d], sizeof stream[d] - at[d], s, q[i].b, q[i].len);
    }
    for (int d = 0; d < N; d++)
        put(emit, ctx, FZ_GLB, PHX_FZ_GLB_PARAM(N, d, 1, 1), stream[d], at[d]);
    for (int r = 0; r < N; r++)
        phx_glb_sm_free(m[r]);
}

void phx_fuzz_msg_seeds(emit_fn emit, void *ctx)
{
    seeds_era(emit, ctx);
    seeds_hb(emit, ctx);
    seeds_td(emit, ctx);
    seeds_ckctl(emit, ctx);
    seeds_mlog(emit, ctx);
    seeds_blob(emit, ctx);
    seeds_disk(emit, ctx);
    seeds_core(emit, ctx);
    seeds_glb(emit, ctx);
}

/* jacobi: 2-D Jacobi stencil over an N x N grid split into V blocks per node
 * (over-decomposed). Blocks exchange ghost rows and columns by messages, run
 * a fixed number of iterations and send their residual to the main task,
 * which sums it in block order (canonical, so bitwise reproducible). The
 * result is a 64-bit checksum of the final grid, order-independent by
 * construction (a sum of per-cell hashes), so `--seq` (one process, one
 * array) must print the same value.
 *
 * Usage: jacobi [-N n] [-i iters] [-V blocks/node] [-c ckpt_every] [-T] [-H iter -g FILE] [--seq [-P nodes]]
 *   -T      tagged, receive-deterministic variant (for recovery=mlog-fast):
 *           every message between tasks is tagged (ghosts and residuals
 *           with their iteration), each task drops duplicates and counts
 *           ghosts per iteration through its tag box, and both task types
 *           declare PHX_TYPE_RECV_DET. Same result bits as without -T.
 *   -H, -g  a test's gate: after iteration H, the checkpoint due next and
 *           the job's end wait until FILE exists ({"ev":"jacobi_hold"}
 *           logged at H): a kill lands between two checkpoints by
 *           construction. The blocks run on meanwhile.
 * Progress: the main task writes {"ev":"jacobi_iter","iter":k} to the event
 * log once iteration k's residual is complete (test triggers wait on it). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/phalanx.h"
#include "base/phx_err.h"
#include "apps/common/phx_args.h"

enum { T_START, T_GHOST, T_RES, T_FINAL, T_POLL };
enum { S_N, S_S, S_W, S_E };   /* sides of a block */

typedef struct params { int n, iters, v, ckpt_every, nodes, hold; } params_t;

static params_t P = { 256, 200, 4, 0, 1, -1 };   /* main task / --seq only */
static int TAGGED;   /* -T, set on every node before phx_main */
static int blk_type, main_type;
static const char *GATE;   /* set on every node: a restored main finds it too */

static int gate_open(void) { return !GATE || access(GATE, F_OK) == 0; }

/* One formula for both modes: the same operation order gives the same bits. */
static inline double stencil(double n, double s, double w, double e) { return 0.25 * ((n + s) + (w + e)); }
static double init_val(int i, int j) { return (double)((i * 31 + j * 17) % 97) / 97.0; }
/* Global boundary: the top edge is hot, the others cold. */
static double bnd_val(int i, int j) { (void)j; return i < 0 ? 1.0 : 0.0; }

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t cell_hash(int n, int i, int j, double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return mix64(b ^ mix64((uint64_t)i * (uint64_t)n + (uint64_t)j + 1));
}

/* Block layout: bx columns by by rows of blocks, nb = bx * by. */
static void layout(int nb, int *bx, int *by)
{
    int x = 1;
    for (int d = 1; d * d <= nb; d++)
        if (nb % d == 0)
            x = d;
    *bx = nb / x;
    *by = x;
}
static int lo(int k, int parts, int n) { return (int)((int64_t)k * n / parts); }

/* ---- block task ---------------------------------------------------------- */

typedef struct blk {
    int n, iters, nb;           /* job parameters (from the spawn arg) */
    int idx, r0, r1, c0, c1, h, w, it, need;
    int got[2];
    phx_tid_t main, nbr[4];
    double *u, *v;              /* (h+2) x (w+2), ghost ring included */
    double *gb[2][4];           /* ghosts received for iteration parity p, side s */
    phx_tagbox_t *box;          /* -T: ghosts counted per iteration, duplicates dropped */
    struct far *far;            /* -T: ghosts of iteration it + 2 or later (a replay's) */
    int nfar;
} blk_t;

/* After a restore, survivors re-send a checkpoint interval of ghosts at
 * once: under -T those beyond the two live parities wait here (state). */
typedef struct far { int32_t it, side, len; double *d; } far_t;

typedef struct blk_arg { int idx, n, iters, nb; phx_tid_t main; } blk_arg_t;
typedef struct start_msg { phx_tid_t nbr[4]; } start_msg_t;

#define U(b, a, i, j) ((a)[(size_t)(i) * (size_t)((b)->w + 2) + (size_t)(j)])

static int side_len(const blk_t *b, int s) { return s <= S_S ? b->w : b->h; }

static int blk_alloc(blk_t *b)
{
    size_t cells = (size_t)(b->h + 2) * (size_t)(b->w + 2);
    b->u = calloc(cells, sizeof *b->u);
    b->v = calloc(cells, sizeof *b->v);
    if (!b->u || !b->v)
        return PHX_ENOMEM;
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 4; s++)
            if (!(b->gb[p][s] = calloc((size_t)side_len(b, s), sizeof(double))))
                return PHX_ENOMEM;
    if (TAGGED && !(b->box = phx_tagbox_new()))
        return PHX_ENOMEM;
    return 0;
}

/* Sends to a task, tagged with iteration it under -T. */
static int send_it(phx_ctx_t *c, phx_tid_t dst, int type, int it, const void *buf, size_t len)
{
    return TAGGED ? phx_send_tagged(c, dst, type, (uint64_t)it, buf, len) : phx_send(c, dst, type, buf, len);
}

/* Under -T: unwraps a tagged message; 0 for a duplicate (ignore it), 1 to
 * handle it, and on a broken message the job ends (never a wrong sum). */
static int take(phx_ctx_t *c, phx_tagbox_t *box, phx_tid_t src, int type, const void **m, size_t *len)
{
    if (!TAGGED)
        return 1;
    uint64_t tag;
    int rc = phx_tagbox_recv(c, box, src, type, *m, *len, &tag, m, len);
    if (rc < 0) {
        fprintf(stderr, "jacobi: tagged message of type %d refused: %s\n", type, phx_strerror(rc));
        phx_exit(c, 1);
        return 0;
    }
    return rc;
}

static void blk_geom(blk_t *b, int idx)
{
    int bx, by;
    layout(b->nb, &bx, &by);
    b->idx = idx;
    int a = idx / bx, c = idx % bx;
    b->r0 = lo(a, by, b->n), b->r1 = lo(a + 1, by, b->n);
    b->c0 = lo(c, bx, b->n), b->c1 = lo(c + 1, bx, b->n);
    b->h = b->r1 - b->r0, b->w = b->c1 - b->c0;
}

static void blk_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    blk_t *b = st;
    const blk_arg_t *a = arg;
    (void)len;
    b->n = a->n, b->iters = a->iters, b->nb = a->nb;
    blk_geom(b, a->idx);
    b->main = a->main;
    if (blk_alloc(b)) {
        fprintf(stderr, "jacobi: out of memory for block %d\n", a->idx);
        phx_exit(c, 1);
        return;
    }
    for (int i = -1; i <= b->h; i++)
        for (int j = -1; j <= b->w; j++) {
            int gi = b->r0 + i, gj = b->c0 + j;
            int in = gi >= 0 && gi < b->n && gj >= 0 && gj < b->n;
            U(b, b->u, i + 1, j + 1) = in ? init_val(gi, gj) : bnd_val(gi, gj);
            U(b, b->v, i + 1, j + 1) = U(b, b->u, i + 1, j + 1);
        }
}

static void blk_fini(void *st)
{
    blk_t *b = st;
    free(b->u);
    free(b->v);
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 4; s++)
            free(b->gb[p][s]);
    phx_tagbox_free(b->box);
    for (int i = 0; i < b->nfar; i++)
        free(b->far[i].d);
    free(b->far);
}

/* -T: ghosts for iteration b->it + 1 kept as far move to their parity. */
static void far_pull(blk_t *b)
{
    int k = 0;
    for (int i = 0; i < b->nfar; i++) {
        far_t *x = &b->far[i];
        if (x->it == b->it + 1) {
            memcpy(b->gb[x->it & 1][x->side], x->d, (size_t)x->len * sizeof(double));
            free(x->d);
        } else
            b->far[k++] = *x;
    }
    b->nfar = k;
}

static int far_put(blk_t *b, int it, int side, const void *d, size_t bytes)
{
    far_t *f = realloc(b->far, (size_t)(b->nfar + 1) * sizeof *f);
    if (!f)
        return PHX_ENOMEM;
    b->far = f;
    far_t *x = &f[b->nfar];
    if (!(x->d = malloc(bytes ? bytes : 1)))
        return PHX_ENOMEM;
    memcpy(x->d, d, bytes);
    x->it = it, x->side = side, x->len = (int32_t)(bytes / sizeof(double));
    b->nfar++;
    return 0;
}

/* Sends this block's edges for iteration it; the receiver's side is the
 * opposite of ours. */
static void send_ghosts(phx_ctx_t *c, blk_t *b)
{
    static const int opp[4] = { S_S, S_N, S_E, S_W };
    for (int s = 0; s < 4; s++) {
        if (!b->nbr[s])
            continue;
        int k = side_len(b, s);
        size_t len = 2 * sizeof(int32_t) + (size_t)k * sizeof(double);
        uint8_t buf[8 + 8 * 4096], *m = buf;
        if (len > sizeof buf && !(m = malloc(len))) {
            phx_exit(c, 1);
            return;
        }
        int32_t hd[2] = { b->it, opp[s] };
        memcpy(m, hd, sizeof hd);
        double *d = (double *)(void *)(m + sizeof hd);
        for (int x = 0; x < k; x++)
            d[x] = s == S_N ? U(b, b->u, 1, x + 1) : s == S_S ? U(b, b->u, b->h, x + 1)
                 : s == S_W ? U(b, b->u, x + 1, 1) : U(b, b->u, x + 1, b->w);
        int rc = send_it(c, b->nbr[s], T_GHOST, b->it, m, len);
        if (m != buf)
            free(m);
        if (rc) {
            fprintf(stderr, "jacobi: ghost send failed: %s\n", phx_strerror(rc));
            phx_exit(c, 1);
            return;
        }
    }
}

typedef struct res_msg { int32_t it, idx; double res; } res_msg_t;
typedef struct final_msg { int32_t idx; uint64_t sum; } final_msg_t;

/* Runs every iteration whose ghosts are all here. */
static void blk_advance(phx_ctx_t *c, blk_t *b)
{
    while (b->it < b->iters &&
           (TAGGED ? phx_tagbox_count(c, b->box, T_GHOST, (uint64_t)b->it) : b->got[b->it & 1]) == b->need) {
        int p = b->it & 1;
        for (int x = 0; x < b->w; x++) {
            if (b->nbr[S_N]) U(b, b->u, 0, x + 1) = b->gb[p][S_N][x];
            if (b->nbr[S_S]) U(b, b->u, b->h + 1, x + 1) = b->gb[p][S_S][x];
        }
        for (int x = 0; x < b->h; x++) {
            if (b->nbr[S_W]) U(b, b->u, x + 1, 0) = b->gb[p][S_W][x];
            if (b->nbr[S_E]) U(b, b->u, x + 1, b->w + 1) = b->gb[p][S_E][x];
        }
        b->got[p] = 0;
        double res = 0;
        for (int i = 1; i <= b->h; i++)
            for (int j = 1; j <= b->w; j++) {
                double nv = stencil(U(b, b->u, i - 1, j), U(b, b->u, i + 1, j), U(b, b->u, i, j - 1),
                                    U(b, b->u, i, j + 1));
                double d = nv - U(b, b->u, i, j);
                res += d * d;
                U(b, b->v, i, j) = nv;
            }
        for (int i = 1; i <= b->h; i++)
            memcpy(&U(b, b->u, i, 1), &U(b, b->v, i, 1), (size_t)b->w * sizeof(double));
        res_msg_t r = { b->it, b->idx, res };
        b->it++;
        phx_progress(c, (uint64_t)b->it, (uint64_t)b->iters);   /* this node's blocks keep pace together */
        if (b->nfar)
            far_pull(b);
        if (b->it % 50 == 0)   /* per-block progress: tests check that survivors never go back */
            phx_evlog("jacobi_blk", "\"blk\":%d,\"iter\":%d", b->idx, b->it);
        send_it(c, b->main, T_RES, r.it, &r, sizeof r);
        if (b->it == b->iters) {
            final_msg_t f = { b->idx, 0 };
            for (int i = 1; i <= b->h; i++)
                for (int j = 1; j <= b->w; j++)
                    f.sum += cell_hash(b->n, b->r0 + i - 1, b->c0 + j - 1, U(b, b->u, i, j));
            send_it(c, b->main, T_FINAL, 0, &f, sizeof f);
            return;
        }
        send_ghosts(c, b);
    }
}

static void blk_start(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t len)
{
    blk_t *b = st;
    if (!take(c, b->box, src, T_START, &m, &len))
        return;
    if (len != sizeof(start_msg_t)) {
        fprintf(stderr, "jacobi: malformed start message\n");
        phx_exit(c, 1);
        return;
    }
    memcpy(b->nbr, m, sizeof b->nbr);   /* under -T the body follows the tag: maybe unaligned */
    for (int s = 0; s < 4; s++)
        b->need += b->nbr[s] != 0;
    send_ghosts(c, b);
    blk_advance(c, b);
}

static void blk_ghost(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t len)
{
    blk_t *b = st;
    int32_t hd[2];
    if (!take(c, b->box, src, T_GHOST, &m, &len))
        return;
    memcpy(hd, m, sizeof hd);
    int s = hd[1];
    if (s < 0 || s > 3 || len != sizeof hd + (size_t)side_len(b, s) * sizeof(double)) {
        fprintf(stderr, "jacobi: malformed ghost for block %d\n", b->idx);
        phx_exit(c, 1);
        return;
    }
    if (TAGGED && hd[0] > b->it + 1) {
        if (far_put(b, hd[0], s, (const uint8_t *)m + sizeof hd, len - sizeof hd)) {
            fprintf(stderr, "jacobi: out of memory keeping a ghost\n");
            phx_exit(c, 1);
        }
        return;   /* counted by the box; its iteration is far off */
    }
    memcpy(b->gb[hd[0] & 1][s], (const uint8_t *)m + sizeof hd, len - sizeof hd);
    b->got[hd[0] & 1]++;
    blk_advance(c, b);
}

/* Packed: fixed header, then u and the four ghost buffers of both parities
 * (early ghosts are state too); v is scratch. */
#define BLK_HDR offsetof(blk_t, u)
static size_t blk_size(const blk_t *b)
{
    size_t k = BLK_HDR + (size_t)(b->h + 2) * (size_t)(b->w + 2) * sizeof(double);
    for (int s = 0; s < 4; s++)
        k += 2 * (size_t)side_len(b, s) * sizeof(double);
    for (int i = 0; i < b->nfar; i++)
        k += 12 + (size_t)b->far[i].len * sizeof(double);
    return k + (b->box ? 4 + phx_tagbox_size(b->box) : 0);
}

static int blk_pack(const void *st, void *buf, size_t cap)
{
    const blk_t *b = st;
    size_t need = blk_size(b);
    if (need > cap)
        return PHX_ENOSPC;
    uint8_t *o = buf;
    memcpy(o, b, BLK_HDR);
    o += BLK_HDR;
    size_t k = (size_t)(b->h + 2) * (size_t)(b->w + 2) * sizeof(double);
    memcpy(o, b->u, k);
    o += k;
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 4; s++) {
            k = (size_t)side_len(b, s) * sizeof(double);
            memcpy(o, b->gb[p][s], k);
            o += k;
        }
    if (b->box) {   /* -T: the far ghosts (count, then it, side, len, data), then the box */
        int32_t nf = b->nfar;
        memcpy(o, &nf, 4);
        o += 4;
        for (int i = 0; i < b->nfar; i++) {
            memcpy(o, &b->far[i], 12);
            memcpy(o + 12, b->far[i].d, (size_t)b->far[i].len * sizeof(double));
            o += 12 + (size_t)b->far[i].len * sizeof(double);
        }
        if (phx_tagbox_pack(b->box, o, need - (size_t)(o - (uint8_t *)buf)) < 0)
            return PHX_EPROTO;
    }
    return (int)need;
}

static int blk_unpack(void *st, const void *buf, size_t len)
{
    blk_t *b = st;
    if (len < BLK_HDR)
        return PHX_EPROTO;
    memcpy(b, buf, BLK_HDR);
    b->u = b->v = NULL;
    memset(b->gb, 0, sizeof b->gb);
    b->box = NULL;
    b->far = NULL;
    b->nfar = 0;
    if (b->h <= 0 || b->w <= 0 || blk_size(b) > len || (!TAGGED && blk_size(b) != len))
        return PHX_EPROTO;
    int rc = blk_alloc(b);
    if (rc)
        return rc;
    const uint8_t *i = (const uint8_t *)buf + BLK_HDR;
    size_t k = (size_t)(b->h + 2) * (size_t)(b->w + 2) * sizeof(double);
    memcpy(b->u, i, k);
    memcpy(b->v, i, k);
    i += k;
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 4; s++) {
            k = (size_t)side_len(b, s) * sizeof(double);
            memcpy(b->gb[p][s], i, k);
            i += k;
        }
    if (!TAGGED)
        return 0;
    const uint8_t *end = (const uint8_t *)buf + len;
    int32_t nf;
    if (end - i < 4)
        return PHX_EPROTO;
    memcpy(&nf, i, 4);
    i += 4;
    for (int32_t x = 0; x < nf; x++) {
        far_t h;
        if (end - i < 12)
            return PHX_EPROTO;
        memcpy(&h, i, 12);
        size_t bytes = (size_t)h.len * sizeof(double);
        if (h.len < 0 || (size_t)(end - i - 12) < bytes || far_put(b, h.it, h.side, i + 12, bytes))
            return PHX_EPROTO;
        i += 12 + bytes;
    }
    return phx_tagbox_unpack(b->box, i, (size_t)(end - i));
}

/* ---- main task ----------------------------------------------------------- */

/* Residuals of iterations done..done+W-1 are kept: a block can only run
 * ahead of the slowest by the grid's block diameter. Under -T (mlog-fast)
 * a restored main task is the exception: survivors' blocks kept going, and
 * their logged residuals come back in any order, so those beyond the window
 * wait in `late` (packed with the rest) until it reaches them. */
typedef struct mst {
    params_t p;
    int nb, win, done, nfinal, nlate;
    int ckpt_due, end_held;     /* waiting for the gate (-H, -g) */
    uint64_t sum;
    uint64_t t0;
    double last_res;
    phx_tid_t *blk;             /* nb */
    int *cnt;                   /* win */
    double *res;                /* win x nb */
    res_msg_t *late;            /* nlate, beyond the window (-T) */
    phx_tagbox_t *box;          /* -T: duplicates dropped (packed after late) */
} mst_t;

static int main_alloc(mst_t *s)
{
    s->blk = calloc((size_t)s->nb, sizeof *s->blk);
    s->cnt = calloc((size_t)s->win, sizeof *s->cnt);
    s->res = calloc((size_t)s->win * (size_t)s->nb, sizeof *s->res);
    s->late = s->nlate ? malloc((size_t)s->nlate * sizeof *s->late) : NULL;
    if (TAGGED && !(s->box = phx_tagbox_new()))
        return PHX_ENOMEM;
    return s->blk && s->cnt && s->res && (s->late || !s->nlate) ? 0 : PHX_ENOMEM;
}

static void main_fini(void *st)
{
    mst_t *s = st;
    free(s->blk);
    free(s->cnt);
    free(s->res);
    free(s->late);
    phx_tagbox_free(s->box);
}

static const phx_args_t ARGS = {
    "jacobi", "jacobi [-N n] [-i iters] [-V blocks/node] [-c ckpt_every] [-T] [-H iter -g FILE] [--seq [-P nodes]]",
    "  -N n           grid side, 4 to 65536 (default 256)\n"
    "  -i iters       iterations, >= 1 (default 200)\n"
    "  -V blocks      blocks per node, 1 to 4096 (default 4)\n"
    "  -c every       phx_checkpoint every this many iterations (0: never)\n"
    "  -T             tagged receives (receive-deterministic types, for mlog-fast)\n"
    "  -H iter -g F   hold at iteration iter until file F exists (tests)\n"
    "  --seq [-P n]   run sequentially, as n nodes would split the grid\n"
};

/* Every node parses the same argv, in main() (runtime flags still in it)
 * and again in the main task (phx_argv(), without them). */
static int parse_args(int argc, char **argv, int *seq)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        int *dst = !strcmp(a, "-N") ? &P.n : !strcmp(a, "-i") ? &P.iters : !strcmp(a, "-V") ? &P.v
                 : !strcmp(a, "-c") ? &P.ckpt_every : !strcmp(a, "-P") ? &P.nodes : !strcmp(a, "-H") ? &P.hold
                 : NULL;
        int lo = !strcmp(a, "-N") ? 4 : !strcmp(a, "-c") || !strcmp(a, "-H") ? 0 : 1;
        int hi = !strcmp(a, "-N") ? 65536 : !strcmp(a, "-V") ? 4096 : !strcmp(a, "-P") ? 65536 : 1000000000;
        if (!strcmp(a, "--seq")) {
            *seq = 1;
        } else if (!strcmp(a, "-T")) {
            TAGGED = 1;
        } else if (!strcmp(a, "-g")) {
            if (phx_args_need(&ARGS, argc, argv, i))
                return 2;
            GATE = argv[++i];
        } else if (dst) {
            if (phx_args_need(&ARGS, argc, argv, i) || phx_args_int(&ARGS, a, argv[i + 1], lo, hi, dst))
                return 2;
            i++;
        } else {
            return phx_args_bad(&ARGS, "unknown argument '%s'", a);
        }
    }
    if ((P.hold >= 0) != !!GATE)
        return phx_args_bad(&ARGS, "-H and -g go together");
    return 0;
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    mst_t *s = st;
    (void)arg; (void)len;
    int bx, by, seq = 0;
    if (parse_args(phx_argc(), phx_argv(), &seq)) {
        phx_exit(c, 2);
        return;
    }
    P.nodes = phx_size(c);
    s->p = P;
    s->nb = P.v * P.nodes;
    layout(s->nb, &bx, &by);
    if (P.n / bx < 1 || P.n / by < 1) {
        fprintf(stderr, "jacobi: grid %d too small for %d blocks\n", P.n, s->nb);
        phx_exit(c, 2);
        return;
    }
    s->win = bx + by + 4;
    s->t0 = phx_now_ns();
    if (main_alloc(s)) {
        phx_exit(c, 1);
        return;
    }
    for (int k = 0; k < s->nb; k++) {
        blk_arg_t a = { k, P.n, P.iters, s->nb, phx_self(c) };
        s->blk[k] = phx_spawn_on(c, blk_type, k % P.nodes, &a, sizeof a);
    }
    for (int k = 0; k < s->nb; k++) {
        int a = k / bx, b = k % bx;
        start_msg_t m = { { a > 0 ? s->blk[k - bx] : 0, a < by - 1 ? s->blk[k + bx] : 0,
                            b > 0 ? s->blk[k - 1] : 0, b < bx - 1 ? s->blk[k + 1] : 0 } };
        send_it(c, s->blk[k], T_START, 0, &m, sizeof m);
    }
}

static void main_res(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t len)
{
    mst_t *s = st;
    res_msg_t r;
    if (!take(c, s->box, src, T_RES, &m, &len))
        return;
    if (len != sizeof r) {
        fprintf(stderr, "jacobi: malformed residual\n");
        phx_exit(c, 1);
        return;
    }
    memcpy(&r, m, sizeof r);
    if (TAGGED && r.it >= s->done + s->win && r.it < s->p.iters && r.idx >= 0 && r.idx < s->nb) {
        res_msg_t *l = realloc(s->late, (size_t)(s->nlate + 1) * sizeof *l);
        if (!l) {
            fprintf(stderr, "jacobi: out of memory keeping a residual\n");
            phx_exit(c, 1);
            return;
        }
        s->late = l;
        s->late[s->nlate++] = r;
        return;
    }
    if (r.it < s->done || r.it >= s->done + s->win || r.idx < 0 || r.idx >= s->nb) {
        /* A residual main cannot place means the job's history does not add
         * up (a recovery restored inconsistent states): end without a result
         * rather than print a wrong one. */
        fprintf(stderr, "jacobi: cannot finish: the residual of iteration %d (block %d) is outside the window "
                        "%d..%d, so the restored state is inconsistent; no result is printed\n",
                r.it, r.idx, s->done, s->done + s->win - 1);
        phx_exit(c, 1);
        return;
    }
    int slot = r.it % s->win;
    s->res[(size_t)slot * (size_t)s->nb + (size_t)r.idx] = r.res;
    s->cnt[slot]++;
    while (s->cnt[s->done % s->win] == s->nb) {
        slot = s->done % s->win;
        double sum = 0;
        for (int k = 0; k < s->nb; k++)   /* canonical order: block index */
            sum += s->res[(size_t)slot * (size_t)s->nb + (size_t)k];
        s->cnt[slot] = 0;
        s->last_res = sqrt(sum);
        s->done++;
        /* The window moved on by one: the late residuals it now covers. */
        for (int k = 0; k < s->nlate; k++)
            if (s->late[k].it == s->done + s->win - 1) {
                s->res[(size_t)slot * (size_t)s->nb + (size_t)s->late[k].idx] = s->late[k].res;
                s->cnt[slot]++;
                s->late[k--] = s->late[--s->nlate];
            }
        phx_evlog("jacobi_iter", "\"iter\":%d", s->done);
        if (s->done == s->p.hold)
            phx_evlog("jacobi_hold", "\"iter\":%d", s->done);
        if (s->p.ckpt_every && s->done % s->p.ckpt_every == 0 && s->done < s->p.iters)
            s->ckpt_due = 1;
        /* A checkpoint held by the gate is taken at the first residual after it opens. */
        if (s->ckpt_due && (s->p.hold < 0 || s->done <= s->p.hold || gate_open())) {
            s->ckpt_due = 0;
            phx_checkpoint(c);
        }
    }
}

static void report(const params_t *p, double res, uint64_t sum, double ms)
{
    printf("jacobi N=%d iters=%d blocks=%d residual=%.17g checksum=%016" PRIx64 " (%.1f ms)\n", p->n, p->iters,
           p->v * p->nodes, res, sum, ms);
    fflush(stdout);
}

/* Polls the gate once a millisecond by a message to itself (as tdk's gate). */
static void main_poll(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t len)
{
    mst_t *s = st;
    (void)src; (void)m; (void)len;
    if (!s->end_held)
        return;
    if (gate_open()) {
        s->end_held = 0;
        report(&s->p, s->last_res, s->sum, (double)(phx_now_ns() - s->t0) / 1e6);
        phx_exit(c, 0);
        return;
    }
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
    int rc = phx_send(c, phx_self(c), T_POLL, NULL, 0);
    if (rc) {
        fprintf(stderr, "jacobi: main task cannot poll its gate: %s\n", phx_strerror(rc));
        phx_exit(c, 1);
    }
}

static void main_final(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t len)
{
    mst_t *s = st;
    final_msg_t f;
    if (!take(c, s->box, src, T_FINAL, &m, &len))
        return;
    if (len != sizeof f) {
        fprintf(stderr, "jacobi: malformed final sum\n");
        phx_exit(c, 1);
        return;
    }
    memcpy(&f, m, sizeof f);
    s->sum += f.sum;   /* modular sum: order-independent, exact */
    if (++s->nfinal < s->nb)
        return;
    if (s->p.hold >= 0 && s->done >= s->p.hold && !gate_open()) {   /* the end waits for the gate too */
        s->end_held = 1;
        main_poll(c, st, PHX_TID_NONE, NULL, 0);
        return;
    }
    report(&s->p, s->last_res, s->sum, (double)(phx_now_ns() - s->t0) / 1e6);
    phx_exit(c, 0);
}

#define MST_HDR offsetof(mst_t, blk)
static size_t main_size(const mst_t *s)
{
    return MST_HDR + (size_t)s->nb * sizeof(phx_tid_t) + (size_t)s->win * sizeof(int) +
           (size_t)s->win * (size_t)s->nb * sizeof(double) + (size_t)s->nlate * sizeof(res_msg_t) +
           (s->box ? phx_tagbox_size(s->box) : 0);
}

static int main_pack(const void *st, void *buf, size_t cap)
{
    const mst_t *s = st;
    size_t need = main_size(s);
    if (need > cap)
        return PHX_ENOSPC;
    uint8_t *o = buf;
    memcpy(o, s, MST_HDR);
    o += MST_HDR;
    memcpy(o, s->blk, (size_t)s->nb * sizeof *s->blk);
    o += (size_t)s->nb * sizeof *s->blk;
    memcpy(o, s->cnt, (size_t)s->win * sizeof *s->cnt);
    o += (size_t)s->win * sizeof *s->cnt;
    memcpy(o, s->res, (size_t)s->win * (size_t)s->nb * sizeof *s->res);
    o += (size_t)s->win * (size_t)s->nb * sizeof *s->res;
    if (s->nlate)
        memcpy(o, s->late, (size_t)s->nlate * sizeof *s->late);
    o += (size_t)s->nlate * sizeof *s->late;
    if (s->box && phx_tagbox_pack(s->box, o, need - (size_t)(o - (uint8_t *)buf)) < 0)
        return PHX_EPROTO;
    return (int)need;
}

static int main_unpack(void *st, const void *buf, size_t len)
{
    mst_t *s = st;
    if (len < MST_HDR)
        return PHX_EPROTO;
    memcpy(s, buf, MST_HDR);
    s->box = NULL;
    s->late = NULL;
    if (s->nb <= 0 || s->win <= 0 || s->nlate < 0 || main_size(s) > len || (!TAGGED && main_size(s) != len))
        return PHX_EPROTO;
    if (main_alloc(s))
        return PHX_ENOMEM;
    const uint8_t *i = (const uint8_t *)buf + MST_HDR;
    memcpy(s->blk, i, (size_t)s->nb * sizeof *s->blk);
    i += (size_t)s->nb * sizeof *s->blk;
    memcpy(s->cnt, i, (size_t)s->win * sizeof *s->cnt);
    i += (size_t)s->win * sizeof *s->cnt;
    memcpy(s->res, i, (size_t)s->win * (size_t)s->nb * sizeof *s->res);
    i += (size_t)s->win * (size_t)s->nb * sizeof *s->res;
    if (s->nlate)
        memcpy(s->late, i, (size_t)s->nlate * sizeof *s->late);
    i += (size_t)s->nlate * sizeof *s->late;
    return TAGGED ? phx_tagbox_unpack(s->box, i, len - (size_t)(i - (const uint8_t *)buf)) : 0;
}

/* ---- sequential reference ------------------------------------------------ */

static int run_seq(void)
{
    int n = P.n, w = n + 2, bx, by, nb = P.v * P.nodes;
    layout(nb, &bx, &by);
    double *u = malloc((size_t)w * (size_t)w * sizeof *u), *v = malloc((size_t)w * (size_t)w * sizeof *v);
    double *bres = calloc((size_t)nb, sizeof *bres);
    if (!u || !v || !bres) {
        fprintf(stderr, "jacobi: out of memory\n");
        return 1;
    }
#define G(a, i, j) ((a)[(size_t)((i) + 1) * (size_t)w + (size_t)((j) + 1)])
    for (int i = -1; i <= n; i++)
        for (int j = -1; j <= n; j++)
            G(u, i, j) = G(v, i, j) = (i >= 0 && i < n && j >= 0 && j < n) ? init_val(i, j) : bnd_val(i, j);
    uint64_t t0 = phx_now_ns();
    double last = 0;
    for (int it = 0; it < P.iters; it++) {
        /* Residual per block in the block's own row-major order, then summed
         * in block order: the same additions as the distributed run. */
        for (int k = 0; k < nb; k++) {
            int a = k / bx, b = k % bx;
            double r = 0;
            for (int i = lo(a, by, n); i < lo(a + 1, by, n); i++)
                for (int j = lo(b, bx, n); j < lo(b + 1, bx, n); j++) {
                    double nv = stencil(G(u, i - 1, j), G(u, i + 1, j), G(u, i, j - 1), G(u, i, j + 1));
                    double d = nv - G(u, i, j);
                    r += d * d;
                    G(v, i, j) = nv;
                }
            bres[k] = r;
        }
        double sum = 0;
        for (int k = 0; k < nb; k++)
            sum += bres[k];
        last = sqrt(sum);
        for (int i = 0; i < n; i++)
            memcpy(&G(u, i, 0), &G(v, i, 0), (size_t)n * sizeof(double));
    }
    uint64_t cs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            cs += cell_hash(n, i, j, G(u, i, j));
#undef G
    report(&P, last, cs, (double)(phx_now_ns() - t0) / 1e6);
    free(u);
    free(v);
    free(bres);
    return 0;
}

int main(int argc, char **argv)
{
    int seq = 0;
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    if (parse_args(argc, argv, &seq))
        return 2;
    if (seq)
        return run_seq();
    phx_type_t bt = { .name = "jacobi_block", .state_size = sizeof(blk_t), .init = blk_init, .fini = blk_fini,
                      .pack = blk_pack, .unpack = blk_unpack,
                      .handlers = { [T_START] = blk_start, [T_GHOST] = blk_ghost } };
    phx_type_t mt = { .name = "jacobi_main", .state_size = sizeof(mst_t), .init = main_init, .fini = main_fini,
                      .pack = main_pack, .unpack = main_unpack,
                      .handlers = { [T_RES] = main_res, [T_FINAL] = main_final, [T_POLL] = main_poll } };
    /* -T: both types are receive-deterministic (mlog-fast accepts them):
     * blocks buffer ghosts by iteration, main keys residuals by
     * (iteration, block) and sums in block order. */
    bt.flags = mt.flags = TAGGED ? PHX_TYPE_RECV_DET : 0;
    blk_type = phx_register_type(&bt);
    main_type = phx_register_type(&mt);
    /* The main task parses the program's argv (phx_main strips the
     * runtime's options) and hands the parameters to the blocks. */
    return phx_main(argc, argv, main_type, NULL, 0);
}

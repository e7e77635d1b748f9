/* bc: Brandes betweenness centrality over an SSCA2-style R-MAT graph, on the
 * GLB library (ft/glb) or sequentially.
 *
 * Usage: bc [-n SCALE] [-s SEED] [-e EDGEFACTOR] [-a A -b B -c C]
 *           [--no-permute] [--seq] [--dump-graph FILE] [--out FILE] [--glb-*=...]
 *   N = 2^SCALE vertices, M = EDGEFACTOR * N directed R-MAT edges (defaults
 *   as the X10 benchmark: SCALE 12, seed 2, factor 8, a=0.55 b=c=0.1,
 *   d=0.25, vertex permutation on); self loops and duplicates are dropped.
 * One task is one source vertex; the bag is a list of [lo, hi) source
 * ranges, statically split at start (rank h of P gets [N h/P, N (h+1)/P)).
 * Each source's contributions are rounded to fixed point (2^-24) before
 * they are added, so the integer sums are bit-exact in any order, however
 * sources are stolen, re-executed after a restore or adopted.
 * Prints the vector's FNV-1a checksum, its sum and the top vertex; --out
 * writes "vertex value" lines (rank 0), --dump-graph "u v" edge lines, so
 * an outside tool (networkx) can check both. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "ext/glb/glb_rt.h"
#include "apps/common/phx_args.h"
#include "ft/glb/glb_vec.h"

#define FIX 16777216.0          /* 2^24 */

typedef struct graph { uint32_t n, m; uint32_t *off, *adj; } graph_t;
typedef struct range { uint32_t lo, hi; } range_t;

static struct { int scale, factor, permute; uint64_t seed; double a, b, c; } P = { 12, 8, 1, 2, 0.55, 0.1, 0.1 };
static graph_t G;
/* Per-source scratch, one set per thread (glb-threads), freed with it. */
typedef struct scratch { int32_t *dist; double *sigma, *delta; uint32_t *order; } scratch_t;
static pthread_key_t scratch_key;

static void scratch_free(void *p)
{
    scratch_t *x = p;
    if (!x)
        return;
    free(x->dist), free(x->sigma), free(x->delta), free(x->order);
    free(x);
}

static scratch_t *scratch(void)
{
    scratch_t *x = pthread_getspecific(scratch_key);
    if (x)
        return x;
    x = calloc(1, sizeof *x);
    if (x) {
        x->dist = malloc(G.n * sizeof *x->dist);
        x->sigma = malloc(G.n * sizeof *x->sigma);
        x->delta = malloc(G.n * sizeof *x->delta);
        x->order = malloc(G.n * sizeof *x->order);
    }
    if (!x || !x->dist || !x->sigma || !x->delta || !x->order || pthread_setspecific(scratch_key, x) != 0) {
        fprintf(stderr, "bc: out of memory\n");
        abort();
    }
    return x;
}
static const char *out_path;

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double u01(uint64_t *x) { return (double)(splitmix(x) >> 11) / 9007199254740992.0; }

static int cmp_edge(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int gen_graph(void)
{
    uint32_t n = 1u << P.scale;
    size_t m = (size_t)P.factor * n;
    uint64_t rng = P.seed, *e = malloc(m * sizeof *e);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!e || !perm)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    if (P.permute)
        for (uint32_t i = n - 1; i > 0; i--) {
            uint32_t j = (uint32_t)(splitmix(&rng) % (i + 1));
            uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t u = 0, v = 0;
        for (int l = 0; l < P.scale; l++) {
            double r = u01(&rng);
            int bu = r >= P.a + P.b, bv = (r >= P.a && r < P.a + P.b) || r >= P.a + P.b + P.c;
            u = 2 * u + (uint32_t)bu, v = 2 * v + (uint32_t)bv;
        }
        u = perm[u], v = perm[v];
        if (u != v)
            e[k++] = (uint64_t)u << 32 | v;
    }
    qsort(e, k, sizeof *e, cmp_edge);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (!w || e[i] != e[w - 1])
            e[w++] = e[i];
    G.n = n, G.m = (uint32_t)w;
    G.off = calloc(n + 1, sizeof *G.off);
    G.adj = malloc((w ? w : 1) * sizeof *G.adj);
    if (!G.off || !G.adj)
        return -1;
    for (size_t i = 0; i < w; i++) {
        G.off[(e[i] >> 32) + 1]++;
        G.adj[i] = (uint32_t)e[i];
    }
    for (uint32_t i = 0; i < n; i++)
        G.off[i + 1] += G.off[i];
    free(e);
    free(perm);
    return 0;
}

/* Brandes from source s; adds the fixed-point dependencies into bc. */
static void brandes(uint32_t s, uint64_t *bc)
{
    scratch_t *x = scratch();
    int32_t *dist = x->dist;
    double *sigma = x->sigma, *delta = x->delta;
    uint32_t *order = x->order;
    for (uint32_t i = 0; i < G.n; i++)
        dist[i] = -1, sigma[i] = 0, delta[i] = 0;
    uint32_t head = 0, tail = 0;
    dist[s] = 0, sigma[s] = 1, order[tail++] = s;
    while (head < tail) {
        uint32_t v = order[head++];
        for (uint32_t j = G.off[v]; j < G.off[v + 1]; j++) {
            uint32_t w = G.adj[j];
            if (dist[w] < 0)
                dist[w] = dist[v] + 1, order[tail++] = w;
            if (dist[w] == dist[v] + 1)
                sigma[w] += sigma[v];
        }
    }
    while (tail > 0) {
        uint32_t w = order[--tail];
        for (uint32_t j = G.off[w]; j < G.off[w + 1]; j++) {
            uint32_t x = G.adj[j];
            if (dist[x] == dist[w] + 1)
                delta[w] += sigma[w] / sigma[x] * (1 + delta[x]);
        }
        if (w != s)
            bc[w] += (uint64_t)(delta[w] * FIX + 0.5);
    }
}

/* ---- the bag: source ranges --------------------------------------------- */

static void push(phx_glb_vec_t *b, range_t r)
{
    if (r.lo < r.hi)
        phx_glb_vec_push(b, &r);
}

static void *bag_new(void *app) { (void)app; return phx_glb_vec_new(sizeof(range_t)); }
static void bag_free(void *app, void *b) { (void)app; phx_glb_vec_free(b); }

static void bag_init(void *app, void *b, int rank, int size)
{
    (void)app;
    range_t r = { (uint32_t)((uint64_t)G.n * (uint64_t)rank / (uint64_t)size),
                  (uint32_t)((uint64_t)G.n * (uint64_t)(rank + 1) / (uint64_t)size) };
    push(b, r);
}

static _Atomic uint64_t sources_here;   /* sources this process ran: its progress */

static int process(void *app, void *bb, int n, uint64_t *bc)
{
    phx_glb_vec_t *b = bb;
    (void)app;
    uint64_t k = 0;
    while (n-- > 0 && b->n) {
        range_t *r = phx_glb_vec_at(b, b->n - 1);
        brandes(r->lo++, bc);
        k++;
        if (r->lo >= r->hi)
            b->n--;
    }
    phx_progress(NULL, atomic_fetch_add(&sources_here, k) + k, 0);   /* this node's share is not known ahead */
    return b->n > 0;
}

/* The upper half of every range of two or more sources; else half the ranges. */
static void *split(void *app, void *bb)
{
    phx_glb_vec_t *b = bb, *l = bag_new(app);
    if (!l)
        return NULL;
    for (size_t i = 0; i < b->n; i++) {
        range_t *r = phx_glb_vec_at(b, i);
        uint32_t len = r->hi - r->lo;
        if (len >= 2) {
            push(l, (range_t){ r->lo + len / 2, r->hi });
            r->hi = r->lo + len / 2;
        }
    }
    if (l->n)
        return l;
    phx_glb_vec_free(l);
    return b->n >= 2 ? phx_glb_vec_take_front(b, b->n / 2) : NULL;
}

static void merge(void *app, void *bb, void *ll) { (void)app; phx_glb_vec_merge(bb, ll); }
static int is_empty(void *app, const void *b) { (void)app; return ((const phx_glb_vec_t *)b)->n == 0; }
static size_t pack_size(void *app, const void *b) { (void)app; return 4 + ((const phx_glb_vec_t *)b)->n * 8; }

static void enc_range(const void *item, phx_wenc_t *e)
{
    const range_t *r = item;
    phx_wenc_u32(e, r->lo);
    phx_wenc_u32(e, r->hi);
}

static int dec_range(void *item, phx_wdec_t *d)
{
    range_t *r = item;
    r->lo = phx_wdec_u32(d);
    r->hi = phx_wdec_u32(d);
    return r->hi <= G.n && r->lo < r->hi ? 0 : -1;
}

static void pack(void *app, const void *b, phx_wenc_t *e) { (void)app; phx_glb_vec_pack(b, e, enc_range); }
static void *unpack(void *app, phx_wdec_t *d) { (void)app; return phx_glb_vec_unpack(d, sizeof(range_t), 8, dec_range); }

static void reduce(void *app, uint64_t *acc, const uint64_t *r)
{
    (void)app;
    for (uint32_t i = 0; i < G.n; i++)
        acc[i] += r[i];
}

static void report(void *app, const uint64_t *bc, double secs)
{
    (void)app;
    uint64_t h = 1469598103934665603ULL, sum = 0;
    uint32_t top = 0;
    for (uint32_t i = 0; i < G.n; i++) {
        for (int k = 0; k < 8; k++)
            h = (h ^ ((bc[i] >> (8 * k)) & 0xff)) * 1099511628211ULL;
        sum += bc[i];
        if (bc[i] > bc[top])
            top = i;
    }
    printf("BC N=%" PRIu32 " M=%" PRIu32 " checksum=%016" PRIx64 " sum=%.6f max=%.6f at %" PRIu32 "\n", G.n, G.m,
           h, (double)sum / FIX, (double)bc[top] / FIX, top);
    printf("Wallclock time = %.3f sec, %.0f sources/sec\n", secs, secs > 0 ? G.n / secs : 0.0);
    FILE *f = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !f)
        perror(out_path);
    for (uint32_t i = 0; f && i < G.n; i++)
        fprintf(f, "%" PRIu32 " %.6f\n", i, (double)bc[i] / FIX);
    if (f && fclose(f) != 0)
        perror(out_path);
}

static phx_glb_ops_t OPS = {
    .bag_new = bag_new, .bag_free = bag_free, .bag_init = bag_init, .process = process, .split = split,
    .merge = merge, .is_empty = is_empty, .pack_size = pack_size, .pack = pack, .unpack = unpack,
    .reduce = reduce, .report = report,
};

static const phx_args_t ARGS = {
    "bc", "bc [-n scale] [-e edgefactor] [-s seed] [-a A -b B -c C] [--no-permute] [--seq] "
          "[--dump-graph FILE] [--out FILE] [--glb-*=...]",
    "  -n scale       2^scale vertices, 1 to 24 (default 12)\n"
    "  -e factor      edges per vertex, 1 to 1024 (default 8)\n"
    "  -s seed        graph seed (default 2)\n"
    "  -a, -b, -c     R-MAT probabilities, each 0 to 1, summing to at most 1 (0.55 0.1 0.1)\n"
    "  --no-permute   keep the generator's vertex numbering\n"
    "  --seq          compute in one process\n"
    "  --dump-graph F write the edges to F;  --out F  write every vertex's score to F\n"
};

int main(int argc, char **argv)
{
    phx_glb_cfg_t cfg;
    int seq = 0;
    const char *dump = NULL;
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    if (phx_glb_parse(&argc, argv, &cfg) != 0)
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int rt = phx_args_runtime(argc, argv, i), rc = 0;
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (!strcmp(a, "--seq")) { seq = 1; continue; }
        if (!strcmp(a, "--no-permute")) { P.permute = 0; continue; }
        if (strcmp(a, "--dump-graph") && strcmp(a, "--out") && (a[0] != '-' || !a[1] || a[2] || !strchr("nseabc", a[1])))
            return phx_args_bad(&ARGS, "unknown argument '%s'", a);
        if (phx_args_need(&ARGS, argc, argv, i))
            return 2;
        v = argv[++i];
        if (!strcmp(a, "--dump-graph")) dump = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "-n")) rc = phx_args_int(&ARGS, a, v, 1, 24, &P.scale);
        else if (!strcmp(a, "-s")) rc = phx_args_u64(&ARGS, a, v, 0, UINT64_MAX, &P.seed);
        else if (!strcmp(a, "-e")) rc = phx_args_int(&ARGS, a, v, 1, 1024, &P.factor);
        else if (!strcmp(a, "-a")) rc = phx_args_dbl(&ARGS, a, v, 0, 1, &P.a);
        else if (!strcmp(a, "-b")) rc = phx_args_dbl(&ARGS, a, v, 0, 1, &P.b);
        else rc = phx_args_dbl(&ARGS, a, v, 0, 1, &P.c);
        if (rc)
            return rc;
    }
    if (P.a + P.b + P.c > 1)
        return phx_args_bad(&ARGS, "-a + -b + -c must be at most 1 (the R-MAT quadrant probabilities), "
                                   "got %g", P.a + P.b + P.c);
    if (pthread_key_create(&scratch_key, scratch_free) != 0 || gen_graph() != 0) {
        fprintf(stderr, "bc: out of memory building the graph\n");
        return 1;
    }
    if (dump) {
        FILE *f = fopen(dump, "w");
        if (!f) {
            perror(dump);
            return 1;
        }
        for (uint32_t u = 0; u < G.n; u++)
            for (uint32_t j = G.off[u]; j < G.off[u + 1]; j++)
                fprintf(f, "%" PRIu32 " %" PRIu32 "\n", u, G.adj[j]);
        if (fclose(f) != 0) {
            perror(dump);
            return 1;
        }
    }
    OPS.result_words = G.n;
    if (!cfg.n)
        cfg.n = 16;     /* a source is a whole BFS: probe often */
    if (seq) {
        uint64_t *bc = calloc(G.n, sizeof *bc);
        void *b = bag_new(NULL);
        if (!bc || !b)
            return 1;
        bag_init(NULL, b, 0, 1);
        uint64_t t0 = phx_now_ns();
        while (process(NULL, b, 1 << 20, bc)) {}
        report(NULL, bc, (double)(phx_now_ns() - t0) / 1e9);
        bag_free(NULL, b);
        free(bc);
        scratch_free(pthread_getspecific(scratch_key));
        return 0;
    }
    return phx_glb_run(argc, argv, &OPS, NULL, &cfg);
}

/* uts: Unbalanced Tree Search, bit-compatible with UTS 2.1 (SHA-1 splittable
 * RNG through OpenSSL), on the GLB library (ft/glb) or sequentially.
 *
 * Usage: uts [-t type] [-b b0] [-r seed] [-m nonLeafBF] [-q nonLeafProb]
 *            [-d gen_mx] [-a shape] [-f shiftDepth] [-g gran] [--seq]
 *            [--glb-ft=on|off --glb-n=N --glb-w=W --glb-z=Z --glb-k=K ...]
 *   -t 0 binomial, 1 geometric, 2 hybrid; -a 0 linear, 1 exp-dec, 2 cyclic,
 *   3 fixed. Defaults as UTS 2.1: -t 1 -b 4 -r 0 -m 4 -q 0.234375 -d 6 -a 0
 *   -f 0.5 -g 1.
 * Node id: root = SHA1(16 zero bytes | seed, big endian); child i =
 * SHA1(parent | i, big endian); rand = digest bytes 16..19 big endian, low
 * 31 bits. Prints the tree size, depth and leaves as the reference does. */
#include <inttypes.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "ext/glb/glb_rt.h"
#include "ft/glb/glb_vec.h"
#include "apps/common/phx_args.h"

enum { BIN = 0, GEO, HYBRID };
enum { LINEAR = 0, EXPDEC, CYCLIC, FIXED };
#define MAXNUMCHILDREN 100

typedef struct uts_params {
    int type, root_id, non_leaf_bf, gen_mx, shape, gran;
    double b0, non_leaf_prob, shift_depth;
} uts_params_t;

static uts_params_t U = { GEO, 0, 4, 6, LINEAR, 1, 4.0, 15.0 / 64.0, 0.5 };

typedef struct unode { uint8_t st[20]; int32_t height; uint8_t type; } unode_t;
enum { R_NODES, R_LEAVES, R_DEPTH, R_WORDS };

static int rng_rand(const uint8_t *st)
{
    uint32_t b = (uint32_t)st[16] << 24 | (uint32_t)st[17] << 16 | (uint32_t)st[18] << 8 | st[19];
    return (int)(b & 0x7fffffff);
}

static double to_prob(int n) { return n < 0 ? 0.0 : (double)n / 2147483648.0; }

/* SHA1() fetches the algorithm from the provider on every call (a lock, a
 * name lookup, a free): two thirds of UTS's time. Fetch once, keep one
 * context per thread (workers of a node share the bag and hash in parallel). */
static EVP_MD *sha1_md;
static pthread_key_t sha1_key;    /* this thread's EVP_MD_CTX, freed at its exit */
static pthread_once_t sha1_once = PTHREAD_ONCE_INIT;

static void sha1_setup(void)
{
    if (!(sha1_md = EVP_MD_fetch(NULL, "SHA1", NULL)) ||
        pthread_key_create(&sha1_key, (void (*)(void *))EVP_MD_CTX_free) != 0) {
        fprintf(stderr, "uts: cannot fetch SHA-1 from OpenSSL\n");
        exit(1);
    }
}

static void sha1(const uint8_t *in, size_t len, uint8_t *out)
{
    pthread_once(&sha1_once, sha1_setup);
    EVP_MD_CTX *c = pthread_getspecific(sha1_key);
    if (!c && (!(c = EVP_MD_CTX_new()) || pthread_setspecific(sha1_key, c) != 0)) {
        fprintf(stderr, "uts: out of memory for a SHA-1 context\n");
        exit(1);
    }
    if (!EVP_DigestInit_ex2(c, sha1_md, NULL) || !EVP_DigestUpdate(c, in, len) || !EVP_DigestFinal_ex(c, out, NULL)) {
        fprintf(stderr, "uts: SHA-1 through OpenSSL failed\n");
        exit(1);
    }
}

static void rng_init(uint8_t *out, int seed)
{
    uint8_t in[20] = { 0 };
    in[16] = (uint8_t)(seed >> 24), in[17] = (uint8_t)(seed >> 16);
    in[18] = (uint8_t)(seed >> 8), in[19] = (uint8_t)seed;
    sha1(in, sizeof in, out);
}

static void rng_spawn(const uint8_t *parent, uint8_t *out, int i)
{
    uint8_t in[24];
    memcpy(in, parent, 20);
    in[20] = (uint8_t)(i >> 24), in[21] = (uint8_t)(i >> 16), in[22] = (uint8_t)(i >> 8), in[23] = (uint8_t)i;
    sha1(in, sizeof in, out);
}

static int num_children_bin(const unode_t *p)
{
    return to_prob(rng_rand(p->st)) < U.non_leaf_prob ? U.non_leaf_bf : 0;
}

static int num_children_geo(const unode_t *p)
{
    double b = U.b0;
    int depth = p->height;
    if (depth > 0) {
        switch (U.shape) {
        case EXPDEC:
            b = U.b0 * pow((double)depth, -log(U.b0) / log((double)U.gen_mx));
            break;
        case CYCLIC:
            b = depth > 5 * U.gen_mx ? 0.0
                                     : pow(U.b0, sin(2.0 * 3.141592653589793 * (double)depth / (double)U.gen_mx));
            break;
        case FIXED:
            b = depth < U.gen_mx ? U.b0 : 0;
            break;
        default:
            b = U.b0 * (1.0 - (double)depth / (double)U.gen_mx);
            break;
        }
    }
    double prob = 1.0 / (1.0 + b);
    double u = to_prob(rng_rand(p->st));
    double k = floor(log(1 - u) / log(1 - prob));
    /* The reference casts NaN/negative to int (undefined); both mean none. */
    return k > 0 && k < 2147483647.0 ? (int)k : 0;
}

static int num_children(const unode_t *p)
{
    int n = 0;
    switch (U.type) {
    case BIN:
        n = p->height == 0 ? (int)floor(U.b0) : num_children_bin(p);
        break;
    case GEO:
        n = num_children_geo(p);
        break;
    default:
        n = p->height < U.shift_depth * U.gen_mx ? num_children_geo(p) : num_children_bin(p);
        break;
    }
    if (p->height == 0 && p->type == BIN) {
        int root_bf = (int)ceil(U.b0);
        if (n > root_bf)
            n = root_bf;
    } else if (n > MAXNUMCHILDREN) {
        n = MAXNUMCHILDREN;
    }
    return n;
}

static int child_type(const unode_t *p)
{
    if (U.type == HYBRID)
        return p->height < U.shift_depth * U.gen_mx ? GEO : BIN;
    return U.type;
}

/* ---- the bag: a stack of unexpanded nodes ---------------------------------- */

static void *bag_new(void *app) { (void)app; return phx_glb_vec_new(sizeof(unode_t)); }
static void bag_free(void *app, void *b) { (void)app; phx_glb_vec_free(b); }

static void bag_init(void *app, void *bb, int rank, int size)
{
    (void)app; (void)size;
    if (rank != 0)
        return;
    unode_t root = { .height = 0, .type = (uint8_t)U.type };
    rng_init(root.st, U.root_id);
    phx_glb_vec_push(bb, &root);
}

static _Atomic uint64_t nodes_here;   /* tree nodes this process visited: its progress */

static int process(void *app, void *bb, int n, uint64_t *r)
{
    phx_glb_vec_t *b = bb;
    (void)app;
    uint64_t n0 = r[R_NODES];
    while (n-- > 0 && b->n) {
        unode_t p = *(unode_t *)phx_glb_vec_at(b, --b->n);
        int k = num_children(&p);
        r[R_NODES]++;
        if ((uint64_t)p.height > r[R_DEPTH])
            r[R_DEPTH] = (uint64_t)p.height;
        if (k <= 0) {
            r[R_LEAVES]++;
            continue;
        }
        unode_t c = { .height = p.height + 1, .type = (uint8_t)child_type(&p) };
        for (int i = 0; i < k; i++) {
            for (int g = 0; g < U.gran; g++)
                rng_spawn(p.st, c.st, i);
            phx_glb_vec_push(b, &c);
        }
    }
    phx_progress(NULL, atomic_fetch_add(&nodes_here, r[R_NODES] - n0) + r[R_NODES] - n0, 0);   /* total unknown */
    return b->n > 0;
}

/* The bottom half of the stack: the shallowest nodes, the biggest subtrees. */
static void *split(void *app, void *bb)
{
    phx_glb_vec_t *b = bb;
    (void)app;
    return b->n < 2 ? NULL : phx_glb_vec_take_front(b, b->n / 2);
}

static void merge(void *app, void *bb, void *ll) { (void)app; phx_glb_vec_merge(bb, ll); }
static int is_empty(void *app, const void *b) { (void)app; return ((const phx_glb_vec_t *)b)->n == 0; }

#define NODE_WIRE 25
static size_t pack_size(void *app, const void *b) { (void)app; return 4 + ((const phx_glb_vec_t *)b)->n * NODE_WIRE; }

static void enc_node(const void *item, phx_wenc_t *e)
{
    const unode_t *x = item;
    phx_wenc_bytes(e, x->st, 20);
    phx_wenc_i32(e, x->height);
    phx_wenc_u8(e, x->type);
}

static int dec_node(void *item, phx_wdec_t *d)
{
    unode_t *x = item;
    phx_wdec_bytes(d, x->st, 20);
    x->height = phx_wdec_i32(d);
    x->type = phx_wdec_u8(d);
    return x->height >= 0 && x->type <= HYBRID ? 0 : -1;
}

static void pack(void *app, const void *b, phx_wenc_t *e) { (void)app; phx_glb_vec_pack(b, e, enc_node); }
static void *unpack(void *app, phx_wdec_t *d)
{
    (void)app;
    return phx_glb_vec_unpack(d, sizeof(unode_t), NODE_WIRE, dec_node);
}

static void reduce(void *app, uint64_t *acc, const uint64_t *r)
{
    (void)app;
    acc[R_NODES] += r[R_NODES];
    acc[R_LEAVES] += r[R_LEAVES];
    if (r[R_DEPTH] > acc[R_DEPTH])
        acc[R_DEPTH] = r[R_DEPTH];
}

static void report(void *app, const uint64_t *r, double secs)
{
    (void)app;
    printf("Tree size = %" PRIu64 ", tree depth = %" PRIu64 ", num leaves = %" PRIu64 " (%.2f%%)\n", r[R_NODES],
           r[R_DEPTH], r[R_LEAVES], r[R_NODES] ? 100.0 * (double)r[R_LEAVES] / (double)r[R_NODES] : 0.0);
    printf("Wallclock time = %.3f sec, performance = %.0f nodes/sec\n", secs,
           secs > 0 ? (double)r[R_NODES] / secs : 0.0);
}

static const phx_glb_ops_t OPS = {
    .result_words = R_WORDS, .bag_new = bag_new, .bag_free = bag_free, .bag_init = bag_init,
    .process = process, .split = split, .merge = merge, .is_empty = is_empty, .pack_size = pack_size,
    .pack = pack, .unpack = unpack, .reduce = reduce, .report = report,
};

static const phx_args_t ARGS = {
    "uts", "uts [-t 0|1|2] [-b b0] [-r seed] [-m nonLeafBF] [-q nonLeafProb] [-d gen_mx] [-a 0|1|2|3] "
           "[-f shiftDepth] [-g granularity] [--seq] [--glb-*=...]",
    "  -t type        0 binomial, 1 geometric, 2 hybrid (default 1)\n"
    "  -b b0          root branching factor, 0 to 1e6 (default 4)\n"
    "  -r seed        root seed, 0 to 2147483647 (default 0)\n"
    "  -m m           binomial: children of a non-leaf, 1 to 100 (default 4)\n"
    "  -q q           binomial: probability of a non-leaf, 0 to 1 (default 0.234375)\n"
    "  -d depth       geometric: depth limit, 1 to 100000 (default 6)\n"
    "  -a shape       0 linear, 1 exponential decreasing, 2 cyclic, 3 fixed (default 0)\n"
    "  -f depth       hybrid: shift depth, 0 to 1 (default 0.5)\n"
    "  -g gran        nodes per unit of work, 1 to 1e6 (default 1)\n"
    "  --seq          count in one process\n"
};

static int parse(int argc, char **argv, int *seq)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (!strcmp(a, "--seq")) {
            *seq = 1;
            continue;
        }
        if (a[0] != '-' || !a[1] || a[2] || !strchr("tbrmqdafg", a[1]))
            return phx_args_bad(&ARGS, "unknown argument '%s'", a);
        if (phx_args_need(&ARGS, argc, argv, i))
            return 2;
        const char *v = argv[++i];
        int rc = 0;
        switch (a[1]) {
        case 't': rc = phx_args_int(&ARGS, a, v, BIN, HYBRID, &U.type); break;
        case 'b': rc = phx_args_dbl(&ARGS, a, v, 0, 1e6, &U.b0); break;
        case 'r': rc = phx_args_int(&ARGS, a, v, 0, 2147483647, &U.root_id); break;
        case 'm': rc = phx_args_int(&ARGS, a, v, 1, MAXNUMCHILDREN, &U.non_leaf_bf); break;
        case 'q': rc = phx_args_dbl(&ARGS, a, v, 0, 1, &U.non_leaf_prob); break;
        case 'd': rc = phx_args_int(&ARGS, a, v, 1, 100000, &U.gen_mx); break;
        case 'a': rc = phx_args_int(&ARGS, a, v, LINEAR, FIXED, &U.shape); break;
        case 'f': rc = phx_args_dbl(&ARGS, a, v, 0, 1, &U.shift_depth); break;
        case 'g': rc = phx_args_int(&ARGS, a, v, 1, 1000000, &U.gran); break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    phx_glb_cfg_t cfg;
    int seq = 0;
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    if (phx_glb_parse(&argc, argv, &cfg) != 0 || parse(argc, argv, &seq) != 0)
        return 2;
    if (seq) {
        uint64_t r[R_WORDS] = { 0 };
        void *b = bag_new(NULL);
        bag_init(NULL, b, 0, 1);
        uint64_t t0 = phx_now_ns();
        while (process(NULL, b, 1 << 20, r)) {}
        report(NULL, r, (double)(phx_now_ns() - t0) / 1e9);
        bag_free(NULL, b);
        return 0;
    }
    return phx_glb_run(argc, argv, &OPS, NULL, &cfg);
}

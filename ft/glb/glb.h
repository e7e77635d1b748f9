/* Lifeline-based global load balancing (GLB), optionally fault tolerant
 * (FTGLB: "Fault Tolerance for Lifeline-Based Global Load Balancing",
 * Fohry, Bungart and Plock). A program supplies a task bag through callbacks, as in
 * X10's GLB TaskQueue, and calls phx_glb_run() (ext/glb/glb_rt.h); the library spreads the bag
 * over the nodes by random steals and hypercube lifelines, backs each node's
 * bag up at its ring successor (glb-ft=on), restores lost bags, detects
 * termination and reduces the per-node results at the root: rank 0, or the
 * lowest live rank once rank 0 is lost (with glb-ft=on rank 0's bag is
 * backed up like any other, so its loss is survived like any single loss).
 *
 * Threading: every callback runs on the worker thread that owns the node's
 * GLB task, one at a time, except process(): with glb-threads=T > 1 the
 * node's bag is split into up to T pieces for each process(n) round and T
 * threads process one piece each, at once (process must then touch only its
 * bag and result, and thread-local scratch); the pieces are merged back
 * before anything else runs, so backups always see the whole node bag. */
#ifndef PHX_GLB_H
#define PHX_GLB_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

#define PHX_GLB_MAXP 64     /* ranks (the adopted-set masks are 64 bits) */

/* The application's task bag. A result is result_words 64-bit words,
 * zeroed at start; reduce must be commutative and associative, so any
 * adoption or steal order gives the same bits. */
typedef struct phx_glb_ops {
    size_t result_words;
    void *(*bag_new)(void *app);
    void (*bag_free)(void *app, void *bag);
    /* Initial work of rank `rank` of `size` (the root task, a static share). */
    void (*bag_init)(void *app, void *bag, int rank, int size);
    /* Runs up to n items, adding their outcome to result; 1 if items remain. */
    int (*process)(void *app, void *bag, int n, uint64_t *result);
    /* Moves about half of the bag into a new bag; NULL when too little is left. */
    void *(*split)(void *app, void *bag);
    /* Moves every item of loot into bag and frees loot. */
    void (*merge)(void *app, void *bag, void *loot);
    int (*is_empty)(void *app, const void *bag);
    /* Serialises the bag (phx_wire cursor; the encoder's sticky error says
     * when it did not fit); unpack returns a new bag or NULL on bad data. */
    size_t (*pack_size)(void *app, const void *bag);
    void (*pack)(void *app, const void *bag, phx_wenc_t *e);
    void *(*unpack)(void *app, phx_wdec_t *d);
    /* acc <- acc (+) r. */
    void (*reduce)(void *app, uint64_t *acc, const uint64_t *r);
    /* The root (rank 0, or the lowest live rank after its loss), once: the
     * reduced result. A root killed after its report and before the job's
     * end left it is followed by the next root's report of the same
     * result: no survivor can know whether the first one got out. */
    void (*report)(void *app, const uint64_t *result, double seconds);
} phx_glb_ops_t;

/* Configuration: --glb-KEY=V flags (removed from argv by phx_glb_parse) or
 * PHX_GLB_KEY environment variables. */
typedef struct phx_glb_cfg {
    int ft;             /* glb-ft: backups and restore (needs --phx-ft; set for you) */
    int n;              /* glb-n: items between probes (511) */
    int w;              /* glb-w: random steal attempts (max(1, ceil(P/10))) */
    int z;              /* glb-z: lifeline dimensions (ceil(log2 P)) */
    int k;              /* glb-k: regular backup every k process(n) calls (2048) */
    int timeout_ms;     /* glb-timeout: ultimate wait for any reply (60000) */
    int threads;        /* glb-threads: threads sharing the node's bag (1) */
    char die[128];      /* glb-die: test hook, POINT:RANK:NTH[:kill=R|:stop] */
} phx_glb_cfg_t;

#endif

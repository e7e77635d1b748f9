/* tdk: termination-detection kernels as Phalanx programs, from the paper
 * "Comparing Distributed Termination Detection Algorithms for Task-Based Runtime Systems on HPC platforms"
 * (§5, §6).
 *
 * Every kernel ends by global quiescence: no task calls phx_exit on
 * success, so the job ends only when the termination detector declares it.
 * That is the point: the kernels exercise the detectors, and the printed
 * results let a script check that nothing was cut short.
 *
 * Shared pieces live here: options (parsed in main() on every node, before
 * phx_main, so all nodes agree without a setup message), node-local
 * counters printed after phx_main returns, the two clocks, placement. */
#ifndef TDK_H
#define TDK_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/phalanx.h"

enum tdk_map { TDK_MAP_SPAWN, TDK_MAP_RR, TDK_MAP_RANDOM, TDK_MAP_SUBTREE };

typedef struct tdk_opts {
    const char *kernel;        /* "ring" | "walk" | "project" */
    enum tdk_map map;
    uint64_t work_ns;          /* spin per task: stretches runs without more messages */
    uint64_t hops;             /* ring, walk */
    double qb;                 /* walk: branching probability */
    double thresh;             /* project: local error threshold */
    uint64_t seed;             /* walk, project (random mappings) */
    const char *hold;          /* --hold FILE: gate file (hold.c), or NULL */
} tdk_opts_t;

extern tdk_opts_t tdk_opt;

/* Node-local counters, summed by the test scripts over the nodes' lines. */
typedef struct tdk_counters {
    _Atomic uint64_t handlers; /* task inits and handlers run here */
    _Atomic uint64_t hops;     /* ring/walk hops run here */
    _Atomic uint64_t leaves;   /* project leaves run here */
    _Atomic uint64_t lost;     /* sends/spawns the runtime refused */
    _Atomic uint64_t last_ns;  /* CLOCK_MONOTONIC of the last task end */
    _Atomic uint64_t last_rt_ns; /* CLOCK_REALTIME of the same instant */
} tdk_counters_t;

extern tdk_counters_t tdk_cnt;

/* Registers the kernels' task types (same order on every node). */
int tdk_ring_register(void);
int tdk_walk_register(void);
int tdk_project_register(void);
/* Main-task bodies: start the kernel from rank 0. */
void tdk_ring_start(phx_ctx_t *c);
void tdk_walk_start(phx_ctx_t *c, phx_tid_t main);
void tdk_project_start(phx_ctx_t *c, phx_tid_t main);
/* Main-task result handlers (walk, project reduce to the main task). */
void tdk_walk_result(phx_ctx_t *c, const void *m, size_t n);
void tdk_project_result(phx_ctx_t *c, const void *m, size_t n);

/* Marks the end of a task body: bumps handlers, records both clocks as the
 * node's latest completion, and returns them. */
void tdk_task_end(uint64_t *mono, uint64_t *rt);
uint64_t tdk_realtime_ns(void);
void tdk_spin(void);           /* burns tdk_opt.work_ns of CPU */

/* First live node at or after `node` (cyclic): kernels route around nodes
 * known dead so that their work can go on under fault tolerance. */
int tdk_live(int node, int size);

/* phx_send / phx_spawn_on with the failure counted and reported, never
 * swallowed. Return 0 or a negative PHX_E* code. */
int tdk_send(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len);
int tdk_spawn_on(phx_ctx_t *c, int type, int node, const void *arg, size_t len, phx_tid_t *out);

/* --hold (hold.c). tdk_result sends a result to a parent, or hands it to
 * this node's gate while the gate is closed (any worker; 0 or a negative
 * PHX_E* code), or returns 1 when no gate is known here yet: the caller
 * keeps the result and tries again later. tdk_hold_pending marks an interior cell created here: the first
 * one while the gate is closed logs "tdk_hold". The gate type is
 * registered on every node; rank 0's main task starts one gate per node. */
int tdk_result(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len);
void tdk_hold_pending(uint64_t cell);
int tdk_gate_register(void);
void tdk_gate_start(phx_ctx_t *c);

/* splitmix64: tiny, seedable, and good enough for placement and forks. */
static inline uint64_t tdk_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static inline uint64_t tdk_next(uint64_t *s) { *s += 0x9e3779b97f4a7c15ULL; return tdk_mix(*s); }
static inline double tdk_unit(uint64_t r) { return (double)(r >> 11) * 0x1.0p-53; }

enum { TDK_T_RESULT = 0 };     /* tag of results flowing up to parents */

#endif

/* Step simulator for the paper's workloads (001 §5): runs the real detector
 * state machines (any phx_td_ops_t) on binary projection trees and on the
 * token ring / random walk, and counts their control messages.
 *
 * Steps are synchronous and control traffic settles after every phase, as
 * Theorem 1 and the §5.2 models assume; control messages go through one
 * global FIFO, so every pair stays FIFO. Single-threaded, deterministic. */
#ifndef PHX_FT_TD_SIM_H
#define PHX_FT_TD_SIM_H

#include <stdint.h>

#include "ft/termination/td.h"

/* Breadth-first labelled full binary tree: task 0 is the root, children of
 * task x are first[x], first[x]+1 (nchild[x] is 0 or 2). */
typedef struct phx_tdsim_tree {
    int ntask, height;         /* height = number of levels */
    int *level, *first;
    uint8_t *nchild;
} phx_tdsim_tree_t;

/* 001 §5.2 projection model: complete 3-level tree; a leaf at level l is
 * refined with probability lambda^l into a complete subtree of 2..5 levels
 * (uniform), repeatedly; levels >= lmax are cropped. */
int phx_tdsim_tree_gen(phx_tdsim_tree_t *t, double lambda, int lmax, uint64_t seed);
void phx_tdsim_tree_free(phx_tdsim_tree_t *t);

typedef enum {
    PHX_TDSIM_INSTANT,         /* active before and after a step: stays active */
    PHX_TDSIM_LOCAL,           /* goes idle each step unless it has a self-message */
    PHX_TDSIM_LOAD,            /* idle only without self-message and if less
                                  loaded than every process sending to it */
    PHX_TDSIM_NMODEL
} phx_tdsim_model_t;

typedef struct phx_tdsim_result {
    uint64_t ctrl;             /* control messages, all processes */
    uint64_t primary;          /* primary (remote) messages */
    uint64_t steps;
    int declared;              /* processes that declared */
    int premature;             /* a declaration came while work remained */
    int fatal;
} phx_tdsim_result_t;

/* Tasks mapped round-robin (x mod P) or uniformly at random (seeded). */
int phx_tdsim_run_tree(const phx_td_ops_t *ops, const phx_tdsim_tree_t *t, int P,
                       int random_map, phx_tdsim_model_t model, uint64_t seed,
                       phx_tdsim_result_t *res);

/* Token ring of Theorem 1: the token starts at 0 and makes k hops, each to
 * a uniform process (a self-hop is local); with probability qb a hop also
 * spawns a local leaf task (random walk with branching, 001 §6.2). */
int phx_tdsim_run_ring(const phx_td_ops_t *ops, int P, int k, double qb, uint64_t seed,
                       phx_tdsim_result_t *res);

#endif

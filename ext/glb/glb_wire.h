/* The GLB glue's own messages between tasks (glb_rt.c), apart from the
 * protocol machine's (ft/glb/glb_sm.c, which decodes its own): each has one
 * encoder and one decoder via the cursor codec, and the decoders are fuzzed
 * (tests/fuzz, family FZ_GLB). Only base/ is included, so the fuzzer links
 * this file without the runtime. Task ids travel as their u64 value.
 *
 *   T_INIT  every rank's GLB task id, then a start time: (size + 1) u64
 *   T_KILL  the sender's pid (a test hook's rank kill): i64
 *   spawn   the GLB task's argument, rank 0's main task id: u64
 * T_UP, T_CONT, M_HERE and M_POLL carry no bytes. */
#ifndef PHX_GLB_WIRE_H
#define PHX_GLB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define PHX_GLB_KILL_LEN 8
#define PHX_GLB_SPAWN_LEN 8
/* T_INIT's length for size ranks. */
#define PHX_GLB_INIT_LEN(size) ((size_t)(size) * 8 + 8)

/* Writes T_INIT for tids[0..size) into out (PHX_GLB_INIT_LEN(size) bytes).
 * Returns the length, or PHX_EINVAL for size outside 1..PHX_GLB_MAXP or
 * PHX_ENOSPC when cap is too small. */
long phx_glb_init_enc(const uint64_t *tids, int size, uint64_t t0, uint8_t *out, size_t cap);
/* Reads T_INIT for a job of size ranks into tids[0..size) and *t0 (may be
 * NULL). 0, or PHX_EPROTO when the length is not exactly size's or size is
 * outside 1..PHX_GLB_MAXP (tids is then untouched). */
int phx_glb_init_dec(const uint8_t *p, size_t n, int size, uint64_t *tids, uint64_t *t0);

void phx_glb_kill_enc(uint8_t out[PHX_GLB_KILL_LEN], int64_t pid);
/* 0, or PHX_EPROTO unless exactly 8 bytes. */
int phx_glb_kill_dec(const uint8_t *p, size_t n, int64_t *pid);

void phx_glb_spawn_enc(uint8_t out[PHX_GLB_SPAWN_LEN], uint64_t main_tid);
/* 0, or PHX_EPROTO unless exactly 8 bytes. */
int phx_glb_spawn_dec(const uint8_t *p, size_t n, uint64_t *main_tid);

#endif

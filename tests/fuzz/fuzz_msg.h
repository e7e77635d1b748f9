/* The message fuzz target (fuzz_msg.c): every decoder that takes bytes
 * from a peer or a file, one target byte choosing which.
 *
 * Input: [target][param][bytes...]. target % FZ_NTARGETS picks the decoder
 * family; param sizes the state machine that consumes the bytes (ranks,
 * sender, variant). */
#ifndef PHX_FUZZ_MSG_H
#define PHX_FUZZ_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "ft/glb/glb.h"

enum {
    FZ_ERA,        /* ft/era: agreement messages into an engine */
    FZ_HB,         /* ft/hb: heartbeat, broadcast, DSET into a detector */
    FZ_TD,         /* ft/termination: every detector's control messages */
    FZ_CKCTL,      /* recovery=cr control head and bodies */
    FZ_MLOG,       /* mlog's det trailer, ack and control messages */
    FZ_BLOB,       /* a checkpoint blob */
    FZ_DISK,       /* a checkpoint file header and a manifest */
    FZ_CORE,       /* the runtime's own control messages, tagged receive */
    FZ_GLB,        /* ft/glb's messages into a node's machine; ext/glb's task messages */
    FZ_NTARGETS
};

/* Calls emit once per seed input (already framed as above), each made by
 * the real encoders or captured from real protocol instances talking. */
void phx_fuzz_msg_seeds(void (*emit)(void *ctx, const uint8_t *buf, size_t len), void *ctx);

/* FZ_GLB's toy task bag (fuzz_msg.c): a vector of u8 depths, each below
 * depth 6 growing two children; the seeds' machines run the same bag. */
extern const phx_glb_ops_t phx_fuzz_glb_ops;
/* FZ_GLB's param: low 3 bits ranks - 2, the next 3 this node's rank (mod
 * ranks), 0x40 glb-ft, 0x80 the bytes are chunks [u8 src][u16 len][len
 * bytes] (src with its high bit set: src's failure notice, no len). */
#define PHX_FZ_GLB_PARAM(size, me, ft, chunks) \
    ((uint8_t)(((size) - 2) | ((me) << 3) | ((ft) ? 0x40 : 0) | ((chunks) ? 0x80 : 0)))

#endif

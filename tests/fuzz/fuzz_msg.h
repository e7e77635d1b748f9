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

enum {
    FZ_ERA,        /* ft/era: agreement messages into an engine */
    FZ_HB,         /* ft/hb: heartbeat, broadcast, DSET into a detector */
    FZ_TD,         /* ft/termination: every detector's control messages */
    FZ_CKCTL,      /* recovery=cr control head and bodies */
    FZ_MLOG,       /* mlog's det trailer, ack and control messages */
    FZ_BLOB,       /* a checkpoint blob */
    FZ_DISK,       /* a checkpoint file header and a manifest */
    FZ_CORE,       /* the runtime's own control messages, tagged receive */
    FZ_NTARGETS
};

/* Calls emit once per seed input (already framed as above), each made by
 * the real encoders or captured from real protocol instances talking. */
void phx_fuzz_msg_seeds(void (*emit)(void *ctx, const uint8_t *buf, size_t len), void *ctx);

#endif

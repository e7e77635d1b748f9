/* recovery=cr's wire and file formats: each message a struct with one
 * encoder and one decoder over the base codec (base/phx_wire.h). The
 * runtime glue (core/ckpt.c, core/ckpt_disk.c) only fills and reads the
 * structs. Layouts, byte by byte: docs/wire.md.
 *
 * Encoders return the bytes written or PHX_ENOSPC (those writing to a
 * cursor leave the error in it). Decoders check structure only (lengths,
 * counts, magic) and return 0 or PHX_EPROTO; what a field may say (a live
 * rank, the current round) is the caller's to check. Array fields a
 * decoder sets point into the input (phx_wire_a32_t, dead sets).
 *
 * Pure: no state, callable from any thread. */
#ifndef PHX_FT_CKPT_MSG_H
#define PHX_FT_CKPT_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

/* ---- checkpoint ids ----------------------------------------------------
 * One checkpoint attempt: the recovery round it belongs to (failures
 * handled so far) and its epoch. As a u64 (round high, epoch low) ids
 * order by round first, which the stale-marker filter relies on. */
static inline uint64_t phx_ck_id(uint32_t round, uint32_t epoch) { return (uint64_t)round << 32 | epoch; }
static inline uint32_t phx_ck_id_round(uint64_t id) { return (uint32_t)(id >> 32); }
static inline uint32_t phx_ck_id_epoch(uint64_t id) { return (uint32_t)id; }

/* ---- control head ------------------------------------------------------
 * Every recovery control frame's payload begins with one u64 argument;
 * what it is depends on the frame's tag (docs/wire.md): a checkpoint id,
 * a round, an epoch, a rank or an idle flag. The frame header carries no
 * protocol field of its own. */
#define PHX_CK_CTL_HEAD 8
typedef struct phx_ck_ctl {
    uint64_t arg;
    const uint8_t *body;       /* decoded: the rest of the payload */
    size_t len;
} phx_ck_ctl_t;
void phx_ck_ctl_enc(uint8_t *out, uint64_t arg);
int phx_ck_ctl_dec(const void *p, size_t len, phx_ck_ctl_t *m);

/* ---- bulk transfer -------------------------------------------------------
 * CK_CHUNK body: this header, then the data at off of a blob of total
 * bytes. kind: which transfer (buddy copy, rollback shipment, move home);
 * key: the rank whose state it is. */
#define PHX_CK_CHUNK_HDR 29
typedef struct phx_ck_chunk {
    uint8_t kind;
    int32_t key;
    uint64_t epoch, total, off;
} phx_ck_chunk_t;
void phx_ck_chunk_enc(uint8_t *out, const phx_ck_chunk_t *m);
/* len: the whole body (>= PHX_CK_CHUNK_HDR); the data follows the header. */
int phx_ck_chunk_dec(const void *p, size_t len, phx_ck_chunk_t *m);

/* CK_CACK body: bytes of the transfer received so far. */
#define PHX_CK_CACK_LEN 13
typedef struct phx_ck_cack {
    uint8_t kind;
    int32_t key;
    uint64_t got;
} phx_ck_cack_t;
void phx_ck_cack_enc(uint8_t *out, const phx_ck_cack_t *m);
int phx_ck_cack_dec(const void *p, size_t len, phx_ck_cack_t *m);

/* ---- commit round --------------------------------------------------------
 * CK_BEGIN body: every rank's buddy (-1: dead), then, when slices go home
 * at this cut, the new relocation table (nloc entries). */
typedef struct phx_ck_begin {
    const int *buddy, *loc;    /* to encode: n, and nloc or NULL */
    phx_wire_a32_t buddies, table;   /* decoded (table.n == 0: none) */
} phx_ck_begin_t;
long phx_ck_begin_enc(const phx_ck_begin_t *m, int n, int nloc, void *buf, size_t cap);
int phx_ck_begin_dec(const void *p, size_t len, int n, int nloc, phx_ck_begin_t *m);

/* CK_READY body: messages queued at this rank's cut (0: quiet). */
#define PHX_CK_READY_LEN 8
void phx_ck_ready_enc(uint8_t *out, uint64_t queued);
int phx_ck_ready_dec(const void *p, size_t len, uint64_t *queued);

/* ---- recovery round ------------------------------------------------------
 * RB_STATE, RB_DECIDE and a CK_COMMIT that takes ranks in: an epoch, the
 * sender's dead set (n bytes, 0/1) and a flags byte, then optionally the
 * join tail for newcomers: the detector view, each rank's new incarnation
 * (0: not taken in), the relocation table and the buddies they adopt.
 * flags: STATE: the reporter's partial-round bits; DECIDE: PHX_CK_D_*. */
enum { PHX_CK_D_DISK = 1, PHX_CK_D_PARTIAL = 2, PHX_CK_D_SEQ = 4 };
typedef struct phx_ck_eset {
    uint64_t epoch;
    const uint8_t *dead;       /* n bytes: the sender's (encode), in place (decode) */
    uint8_t flags;
    int joins;                 /* the join tail follows */
    uint16_t view;
    const uint32_t *incs;      /* to encode, with joins: n */
    const int *loc, *buddy;    /* to encode, with joins: nloc, n (buddy NULL: all -1) */
    phx_wire_a32_t inc, table, buddies;   /* decoded, with joins */
} phx_ck_eset_t;
size_t phx_ck_eset_len(int n, int nloc, int joins);
long phx_ck_eset_enc(const phx_ck_eset_t *m, int n, int nloc, void *buf, size_t cap);
int phx_ck_eset_dec(const void *p, size_t len, int n, int nloc, phx_ck_eset_t *m);

/* RB_JOIN body: a newcomer's incarnation, reported by a rank it reached. */
#define PHX_CK_JOIN_LEN 4
void phx_ck_join_enc(uint8_t *out, uint32_t inc);
int phx_ck_join_dec(const void *p, size_t len, uint32_t *inc);

/* RB_ABORT body: a rank and its buddy that both died (no copy is left). */
#define PHX_CK_ABORT_LEN 8
typedef struct phx_ck_abort {
    int32_t lost, buddy;
} phx_ck_abort_t;
void phx_ck_abort_enc(uint8_t *out, const phx_ck_abort_t *m);
int phx_ck_abort_dec(const void *p, size_t len, phx_ck_abort_t *m);

/* ---- checkpoint blob -----------------------------------------------------
 * One rank's state: this head, then ntasks task records, a u32 count and
 * that many queued message records, a u32 count and that many finished
 * task ids (u64). The head's creator is the creator number the blob's ids
 * carry (a newcomer taken in without its checkpoint numbers its ids from a
 * creator other than its rank); stored as its distance from rank. */
#define PHX_CK_BLOB_MAGIC 0x4b434850u   /* "PHCK" */
#define PHX_CK_BLOB_HEAD 16
typedef struct phx_ck_blob_head {
    uint16_t rank, creator;
    uint32_t seq;              /* the rank's spawn counter */
    uint32_t ntasks;
} phx_ck_blob_head_t;
void phx_ck_blob_head_enc(phx_wenc_t *e, const phx_ck_blob_head_t *h);
int phx_ck_blob_head_dec(phx_wdec_t *d, phx_ck_blob_head_t *h);
/* The head of a whole blob (0, or PHX_EPROTO). */
int phx_ck_blob_head_get(const void *blob, size_t len, phx_ck_blob_head_t *h);

/* A message record (queued, or held back by its task). */
typedef struct phx_ck_msgrec {
    uint8_t kind;
    uint16_t type;
    uint64_t src, dst, ssn;
    uint32_t tag, len;
    const void *data;
} phx_ck_msgrec_t;
void phx_ck_msgrec_enc(phx_wenc_t *e, const phx_ck_msgrec_t *m);
int phx_ck_msgrec_dec(phx_wdec_t *d, phx_ck_msgrec_t *m);

/* A task record: id, type, rsn, two (key, value) maps (the counts
 * first), the packed state (u32 length first), the held-back messages
 * (u32 count first). The maps, state and messages are written by the
 * caller between phx_ck_task_head_enc and the counts it back-patches. */
typedef struct phx_ck_task_head {
    uint64_t id;
    uint16_t type;
    uint64_t rsn;
} phx_ck_task_head_t;
void phx_ck_task_head_enc(phx_wenc_t *e, const phx_ck_task_head_t *t);
int phx_ck_task_head_dec(phx_wdec_t *d, phx_ck_task_head_t *t);
/* Steps over the rest of a task record after its head. */
int phx_ck_task_skip(phx_wdec_t *d);

/* Walks a whole blob without building anything: 0 and the counts, or
 * PHX_EPROTO (truncated, bad magic, a record that runs past the end,
 * trailing bytes). */
typedef struct phx_ck_blob_info {
    phx_ck_blob_head_t head;
    uint32_t queued, gone;
} phx_ck_blob_info_t;
int phx_ck_blob_scan(const void *blob, size_t len, phx_ck_blob_info_t *out);

/* ---- disk --------------------------------------------------------------
 * ckpt-e<E>-r<R>.bin: this header, then the payload of len bytes whose
 * SHA-256 it carries. manifest-e<E>.bin: the manifest, then the SHA-256
 * of all bytes before it. The checksums are the caller's (OpenSSL). */
#define PHX_CKD_FILE_MAGIC 0x54504b4358485000ull   /* "\0PHXCKPT" */
#define PHX_CKD_MANI_MAGIC 0x494e414d58485000ull   /* "\0PHXMANI" */
#define PHX_CKD_VERSION 2      /* 2: the relocation table has slices */
#define PHX_CKD_HDR (8 + 4 + 8 + 8 + 4 + 8 + 32)
typedef struct phx_ckd_hdr {
    uint64_t magic;
    uint32_t version;
    uint64_t tag, epoch;
    uint32_t rank;
    uint64_t len;
    uint8_t sum[32];
} phx_ckd_hdr_t;
void phx_ckd_hdr_enc(uint8_t *out, const phx_ckd_hdr_t *h);
/* Fields as found: the caller judges magic, version, tag, epoch and rank
 * (PHX_EPROTO only when fewer than PHX_CKD_HDR bytes). */
int phx_ckd_hdr_dec(const void *p, size_t len, phx_ckd_hdr_t *h);

typedef struct phx_ckd_manifest {
    uint64_t epoch;
    int size;                   /* ranks of the job that wrote it */
    int nhome;                  /* home ranks covered by loc */
    int slices;                 /* loc entries per home rank (PHX_LOC_SLICES) */
    int *loc;                   /* (home, slice) -> rank whose file holds those tasks */
    int nfiles;
    int *ranks;                 /* ranks with a file, increasing */
} phx_ckd_manifest_t;
/* Encodes m (magic, version, tag first) into a malloc'd buffer with room
 * for the 32-byte checksum after *body bytes. */
uint8_t *phx_ckd_manifest_enc(const phx_ckd_manifest_t *m, uint64_t tag, size_t *body);
/* Decodes and checks the structure (sizes in range, counts that fit);
 * *body: bytes the checksum covers, *sum: the checksum in p. loc and ranks
 * are malloc'd (phx_ckd_manifest_free). 0, PHX_ENOMEM, or PHX_EPROTO with
 * *why saying what is wrong. */
int phx_ckd_manifest_dec(const void *p, size_t len, phx_ckd_manifest_t *m, uint64_t *tag, size_t *body,
                         const uint8_t **sum, const char **why);
void phx_ckd_manifest_free(phx_ckd_manifest_t *m);

#endif

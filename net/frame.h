/* Phalanx wire frame: a fixed 64-byte little-endian header followed by
 * `len` payload bytes. Layout and policy: net/README.md.
 *
 * Pure functions, no sockets, no allocation: callable from any thread; the
 * only shared state is the thread-local buffer behind decode's *why. */
#ifndef PHX_FRAME_H
#define PHX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

#define PHX_FRAME_HDR      64
#define PHX_FRAME_MAGIC    0x584C4850u   /* bytes 'P','H','L','X' */
#define PHX_WIRE_VERSION   3
#define PHX_FRAME_F_LAST_IN_BATCH 0x0001u
#define PHX_FRAME_F_MASK   PHX_FRAME_F_LAST_IN_BATCH   /* all defined flag bits */
/* Largest len decode can ever accept: the total size must fit the int return. */
#define PHX_FRAME_LEN_HARDMAX ((uint32_t)(0x7fffffff - PHX_FRAME_HDR))

enum phx_frame_type {
    PHX_FT_HELLO   = 1,
    PHX_FT_AUTH    = 2,
    PHX_FT_AUTH_OK = 3,
    PHX_FT_ACK     = 4,    /* standalone link ack: lack only, no payload */
    PHX_FT_BATCH   = 5,    /* several small APP/SPAWN messages in one frame (phx_batch_*) */
    PHX_FT_APP     = 16,
    PHX_FT_SPAWN   = 17,
    PHX_FT_CTRL    = 32,
    PHX_FT_HB      = 48,
    PHX_FT_BCAST   = 49,
    PHX_FT_ERA     = 64,
    PHX_FT_TD      = 80,
};

typedef struct phx_frame_hdr {
    uint32_t magic;
    uint8_t  version, type;
    uint16_t flags;
    uint32_t len, crc;
    uint64_t src, dst, ssn;
    uint32_t inc, tag;
    uint64_t lseq, lack;        /* link sequence / cumulative ack (net/link.h) */
} phx_frame_hdr_t;

/* The header of a frame to send, as its sender chooses it: type, tag,
 * endpoints, payload length; the rest zero (the application's ssn and
 * inc, where a frame carries them, are set after). Magic, version, crc
 * and the link fields are the encoder's and the transport's. Every frame a
 * node sends starts here. */
static inline phx_frame_hdr_t phx_frame_hdr(unsigned type, uint32_t tag, uint64_t src, uint64_t dst, uint32_t len)
{
    phx_frame_hdr_t h = { 0 };
    h.type = (uint8_t)type;
    h.tag = tag;
    h.src = src;
    h.dst = dst;
    h.len = len;
    return h;
}

/* Fields of a header already encoded (64 bytes at hdr), read in place:
 * the link walks the sealed frames it keeps by them. */
uint32_t phx_frame_peek_len(const uint8_t *hdr);
uint64_t phx_frame_peek_lseq(const uint8_t *hdr);

/* 1 if t is one of enum phx_frame_type, else 0. */
int phx_frame_type_valid(unsigned t);
/* Static name ("APP", ...) or "UNKNOWN"; never NULL. */
const char *phx_frame_type_name(unsigned t);

/* Writes the 64-byte header for *h into out and fills h->magic, h->version
 * and h->crc (CRC32C over the payload, then the header with crc zeroed).
 * h->len must equal the payload length; payload may be NULL when len == 0.
 * The caller owns out, h and payload; the payload is only read. Flags and
 * type are written as given (the caller is trusted; decode enforces them). */
void phx_frame_encode(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload);

/* Writes the header for *h (magic and version filled in), unsealed: its crc
 * field holds the CRC32C of the h->len payload bytes (read here) and header
 * bytes [0,48) (crc field as zero) until phx_frame_seal finishes it. */
void phx_frame_put_hdr(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload);
/* Same, for a payload in two pieces a[0..na) b[0..nb), na + nb == h->len
 * (a zero-copy send: prefix and caller's buffer). */
void phx_frame_put_hdr2(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *a, size_t na,
                        const void *b, size_t nb);
/* Same, with the payload's checksum already known: payload_crc is
 * phx_crc32c(0, payload, h->len) (the payload is not read). */
void phx_frame_put_hdr_crc(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, uint32_t payload_crc);
/* Seals a header from phx_frame_put_hdr, exactly once: stores lseq and lack
 * and completes the crc over those 16 bytes. */
void phx_frame_seal(uint8_t *hdr, uint64_t lseq, uint64_t lack);

/* Streaming decode of the frame at the start of buf[0..avail).
 * Returns:
 *   > 0            total frame size 48+len: a whole, valid frame; the payload is
 *                  buf + PHX_FRAME_HDR, and *h holds the header.
 *   PHX_ETRUNC     more bytes needed. Header fields are checked as soon as
 *                  their bytes have arrived, so garbage fails fast. Once 48
 *                  bytes are present *h is filled (h->len tells the caller how
 *                  much to buffer); before that *h is left untouched.
 *   PHX_EPROTO     bad magic, unknown type, undefined flag bit, or
 *                  len > max_payload (or > PHX_FRAME_LEN_HARDMAX).
 *   PHX_EVERSION   version != PHX_WIRE_VERSION.
 *   PHX_ECHECKSUM  CRC mismatch.
 * On any negative return other than PHX_ETRUNC, *why (if why != NULL) points
 * to a reason string in a thread-local buffer, valid until this thread's next
 * decode call; on success or PHX_ETRUNC it is set to "". Errors are final for
 * the stream: a byte stream cannot be resynchronised, close the connection. */
int phx_frame_decode(const uint8_t *buf, size_t avail, uint32_t max_payload,
                     phx_frame_hdr_t *h, const char **why);

/* Checks the crc of a frame whose header decode accepted (PHX_ETRUNC with
 * 64 bytes in) and whose payload was received elsewhere (a zero-copy
 * receive): payload_crc is phx_crc32c(0, ...) over all h.len payload bytes
 * in order. Returns 0, or PHX_ECHECKSUM with a reason in *why as decode. */
int phx_frame_verify_crc(const uint8_t hdr[PHX_FRAME_HDR], uint32_t payload_crc, const char **why);

/* ---- batch frames ---------------------------------------------------------
 * A BATCH frame carries several small APP or SPAWN messages bound for the
 * same peer: one header, one checksum, one link sequence number and one
 * decode for all of them, where each message alone would cost a 64-byte
 * header and three checksum passes (most of the CPU an 8-byte message
 * costs). Its payload is a run of entries, each a compact sub-header
 * (type u8, tag u32, len u32, src u64, dst u64, ssn u64) and len bytes;
 * the outer header's inc, lseq, lack and crc stand for every entry. Its
 * src, dst, ssn and tag are 0. */
#define PHX_BATCH_SUB 33

/* Writes the sub-header for *h (type, tag, len, src, dst, ssn) into out. */
void phx_batch_put(uint8_t out[PHX_BATCH_SUB], const phx_frame_hdr_t *h);

/* Starts *h for walking the BATCH frame whose header is *outer: a copy of
 * it with flags 0. Each phx_batch_next then overwrites the entry's fields,
 * so *h is the header of a frame carrying that message alone (the outer
 * frame's magic, version, inc, crc and link fields). */
void phx_batch_begin(phx_frame_hdr_t *h, const phx_frame_hdr_t *outer);
/* Decodes the entry at p[0..avail) into *h (type, tag, len, src, dst, ssn;
 * nothing else is written). Returns the entry's size (PHX_BATCH_SUB +
 * h->len), or PHX_EPROTO with a reason in *why (as decode) when the entry
 * is cut short or its type is neither APP nor SPAWN. */
int phx_batch_next(const uint8_t *p, size_t avail, phx_frame_hdr_t *h, const char **why);
/* Walks a whole BATCH payload: returns the number of entries (at least 2:
 * a sender batches only when it has two), or PHX_EPROTO with a reason in
 * *why. A receiver checks the whole frame before delivering any of it, so
 * a bad frame is refused entire, never half delivered. */
int phx_batch_check(const uint8_t *p, size_t len, const char **why);

#endif

#include "net/link.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "net/frame.h"

typedef struct batch {
    uint8_t *data;
    size_t len, cap;            /* cap: the allocation, for reuse */
    uint64_t first, last, charge;
    phx_link_ext_t *ext;        /* referenced payload tails (zero-copy), next of them */
    int next;
    size_t ext_bytes;
} batch_t;

struct phx_link {
    uint64_t sealed;            /* last sequence number assigned */
    uint64_t acked;             /* peer's highest cumulative ack */
    uint64_t recvd;             /* last sequence number delivered */
    uint64_t ack_sent;          /* recvd as last advertised */
    batch_t *q;                 /* retained batches, oldest at head */
    size_t head, n, cap;        /* ring buffer of batches */
    uint64_t bytes;
    uint64_t copied;            /* of bytes: in the batches themselves (not referenced) */
    /* Released buffers kept for reuse: a fresh multi-megabyte buffer per
     * write costs more in page faults than the copy into it. */
    struct spare { uint8_t *data; size_t len; } *spare;
    size_t nspare, spare_cap, spare_bytes;
};

/* At most this much is kept in spares per link (about what the send-buffer
 * backpressure lets be in flight); the rest is freed. */
#define SPARE_BYTES (64u << 20)

static void release(phx_link_t *l, uint8_t *data, size_t len)
{
    if (l->spare_bytes + len > SPARE_BYTES) {
        free(data);
        return;
    }
    if (l->nspare == l->spare_cap) {
        size_t cap = l->spare_cap ? 2 * l->spare_cap : 8;
        struct spare *s = realloc(l->spare, cap * sizeof *s);
        if (!s) {
            free(data);
            return;
        }
        l->spare = s;
        l->spare_cap = cap;
    }
    l->spare[l->nspare++] = (struct spare){ data, len };
    l->spare_bytes += len;
}

uint8_t *phx_link_spare(phx_link_t *l, size_t *cap)
{
    if (!l->nspare) {
        *cap = 0;
        return NULL;
    }
    /* The largest: a buffer that must grow moves (realloc) onto fresh pages,
     * and page faults, not copies, dominate the small-message rate. */
    size_t big = 0;
    for (size_t i = 1; i < l->nspare; i++)
        if (l->spare[i].len > l->spare[big].len)
            big = i;
    struct spare s = l->spare[big];
    l->spare[big] = l->spare[--l->nspare];
    l->spare_bytes -= s.len;
    *cap = s.len;
    return s.data;
}

int phx_link_create(phx_link_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : PHX_ENOMEM;
}

static batch_t *at(phx_link_t *l, size_t i) { return &l->q[(l->head + i) % l->cap]; }

void phx_link_ext_free(phx_link_ext_t *ext, int next)
{
    for (int i = 0; i < next; i++)
        ext[i].release(ext[i].arg);
    free(ext);
}

static size_t ext_bytes(const phx_link_ext_t *ext, int next)
{
    size_t n = 0;
    for (int i = 0; i < next; i++)
        n += ext[i].len;
    return n;
}

static uint64_t pop_acked(phx_link_t *l)
{
    uint64_t charge = 0;
    while (l->n && at(l, 0)->last <= l->acked) {
        batch_t *b = at(l, 0);
        charge += b->charge;
        l->bytes -= b->len + b->ext_bytes;
        l->copied -= b->len;
        release(l, b->data, b->cap);
        phx_link_ext_free(b->ext, b->next);
        l->head = (l->head + 1) % l->cap;
        l->n--;
    }
    return charge;
}

uint64_t phx_link_reset(phx_link_t *l)
{
    uint64_t charge = 0;
    while (l->n) {
        batch_t *b = at(l, 0);
        charge += b->charge;
        free(b->data);
        phx_link_ext_free(b->ext, b->next);
        l->head = (l->head + 1) % l->cap;
        l->n--;
    }
    l->sealed = l->acked = l->recvd = l->ack_sent = 0;
    l->bytes = l->copied = 0;
    while (l->nspare)
        free(l->spare[--l->nspare].data);
    l->spare_bytes = 0;
    return charge;
}

void phx_link_destroy(phx_link_t *l)
{
    if (!l)
        return;
    phx_link_reset(l);
    free(l->spare);
    free(l->q);
    free(l);
}

/* Bytes in the run of the frame at p within [base, end): all of it, or
 * its inline part when its payload ends in ext[*k] (*k then moves past
 * it); 0 if it is not whole. */
static size_t frame_span(const uint8_t *base, const uint8_t *p, const uint8_t *end,
                         const phx_link_ext_t *ext, int next, int *k)
{
    if ((size_t)(end - p) < PHX_FRAME_HDR)
        return 0;
    size_t o = (size_t)(p - base), sz = PHX_FRAME_HDR + (size_t)phx_frame_peek_len(p);
    if (*k < next && ext[*k].at < o + sz) {
        if (ext[*k].at < o + PHX_FRAME_HDR || ext[*k].at + ext[*k].len != o + sz)
            return 0;   /* a reference that is not this frame's payload tail */
        sz = ext[(*k)++].at - o;
    }
    return sz <= (size_t)(end - p) ? sz : 0;
}

int phx_link_seal(phx_link_t *l, uint8_t *frames, size_t len)
{
    return phx_link_seal_ext(l, frames, len, NULL, 0);
}

int phx_link_seal_ext(phx_link_t *l, uint8_t *frames, size_t len, const phx_link_ext_t *ext, int next)
{
    uint8_t *p = frames, *end = frames + len;
    uint64_t first = l->sealed;
    int k = 0;
    /* One pass: the headers of a large batch are not in cache twice. */
    while (p < end) {
        size_t sz = frame_span(frames, p, end, ext, next, &k);
        if (!sz || (p + sz == end && k < next)) {
            l->sealed = first;   /* a bad run numbers nothing */
            return PHX_EPROTO;
        }
        phx_frame_seal(p, ++l->sealed, l->recvd);
        p += sz;
    }
    if (l->sealed != first)
        l->ack_sent = l->recvd;
    return (int)(l->sealed - first);
}

int phx_link_retain(phx_link_t *l, uint8_t *data, size_t len, size_t cap, int count,
                    uint64_t charge, uint64_t *freed)
{
    return phx_link_retain_ext(l, data, len, cap, count, NULL, 0, charge, freed);
}

int phx_link_retain_ext(phx_link_t *l, uint8_t *data, size_t len, size_t cap, int count,
                        phx_link_ext_t *ext, int next, uint64_t charge, uint64_t *freed)
{
    uint64_t dummy;
    if (!freed)
        freed = &dummy;
    *freed = 0;
    if (!len || count <= 0) {
        free(data);
        phx_link_ext_free(ext, next);
        *freed = charge;
        return 0;
    }
    uint64_t first = phx_frame_peek_lseq(data), last = first + (uint64_t)count - 1;
    if (last <= l->acked) {   /* acked while the write was still in flight */
        release(l, data, cap);
        phx_link_ext_free(ext, next);
        *freed = charge;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        batch_t *q = malloc(cap * sizeof *q);
        if (!q) {
            free(data);
            phx_link_ext_free(ext, next);
            *freed = charge;
            return PHX_ENOMEM;
        }
        for (size_t i = 0; i < l->n; i++)
            q[i] = *at(l, i);
        free(l->q);
        l->q = q;
        l->cap = cap;
        l->head = 0;
    }
    size_t eb = ext_bytes(ext, next);
    *at(l, l->n) = (batch_t){ data, len, cap, first, last, charge, ext, next, eb };
    l->n++;
    l->bytes += len + eb;
    l->copied += len;
    return 0;
}

int phx_link_on_ack(phx_link_t *l, uint64_t ack, uint64_t *freed)
{
    *freed = 0;
    if (ack > l->sealed)
        return PHX_EPROTO;
    if (ack <= l->acked)
        return 0;
    l->acked = ack;
    *freed = pop_acked(l);
    return 0;
}

long phx_link_resend(phx_link_t *l, uint8_t **out)
{
    *out = NULL;
    size_t total = 0, skip = 0, skip_ext = 0;
    int kskip = 0;
    if (!l->n)
        return 0;
    /* The oldest batch may be acked in part: start past its acked frames. */
    batch_t *b0 = at(l, 0);
    for (const uint8_t *p = b0->data, *end = b0->data + b0->len; p < end;) {
        int k = kskip;
        size_t sz = frame_span(b0->data, p, end, b0->ext, b0->next, &k);
        if (!sz || phx_frame_peek_lseq(p) > l->acked)
            break;
        if (k != kskip)
            skip_ext += b0->ext[kskip].len;
        kskip = k;
        skip += sz;
        p += sz;
    }
    for (size_t i = 0; i < l->n; i++)
        total += at(l, i)->len + at(l, i)->ext_bytes;
    total -= skip + skip_ext;
    if (!total)
        return 0;
    uint8_t *buf = malloc(total);
    if (!buf)
        return PHX_ENOMEM;
    size_t off = 0;
    for (size_t i = 0; i < l->n; i++) {
        batch_t *b = at(l, i);
        size_t from = i ? 0 : skip;
        /* Inline runs with the referenced tails put back in between. */
        for (int k = i ? 0 : kskip; k <= b->next; k++) {
            size_t to = k < b->next ? b->ext[k].at : b->len;
            memcpy(buf + off, b->data + from, to - from);
            off += to - from;
            if (k < b->next) {
                memcpy(buf + off, b->ext[k].p, b->ext[k].len);
                off += b->ext[k].len;
            }
            from = to;
        }
    }
    *out = buf;
    return (long)total;
}

uint64_t phx_link_retained(const phx_link_t *l) { return l->bytes; }
uint64_t phx_link_retained_copied(const phx_link_t *l) { return l->copied; }

int phx_link_on_recv(phx_link_t *l, uint64_t seq)
{
    if (seq == 0 || seq > l->recvd + 1)
        return PHX_EPROTO;
    if (seq <= l->recvd)
        return 0;
    l->recvd = seq;
    return 1;
}

uint64_t phx_link_recvd(const phx_link_t *l) { return l->recvd; }

uint64_t phx_link_ack_due(const phx_link_t *l) { return l->recvd - l->ack_sent; }

uint64_t phx_link_take_ack(phx_link_t *l)
{
    l->ack_sent = l->recvd;
    return l->recvd;
}

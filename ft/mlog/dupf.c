/* Duplicate filter (dupf.h). Streams live in a plain array searched
 * linearly: a stencil task has a handful (its neighbours). */
#include "ft/mlog/dupf.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"
#include "base/phx_wire.h"

/* w[0..nw) maps tags base.. (bit i of word j: tag base + 64 j + i). */
typedef struct stream {
    uint64_t sender, receiver, base;
    uint64_t *w;
    uint32_t type, nw;
} stream_t;

struct phx_dupf {
    stream_t *s;
    size_t n, cap;
    uint64_t dups;
};

#define REC 32   /* packed stream: sender, receiver, base, type, nw; then nw words */

phx_dupf_t *phx_dupf_create(void)
{
    return calloc(1, sizeof(phx_dupf_t));
}

static void drop_streams(phx_dupf_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->s[i].w);
    free(f->s);
    f->s = NULL;
    f->n = f->cap = 0;
}

void phx_dupf_destroy(phx_dupf_t *f)
{
    if (f)
        drop_streams(f);
    free(f);
}

static int seen(const stream_t *s, uint64_t tag)
{
    if (tag < s->base)
        return 1;
    uint64_t d = tag - s->base;
    return d / 64 < s->nw && (s->w[d / 64] >> (d % 64) & 1);
}

static stream_t *find(const phx_dupf_t *f, uint64_t sender, uint64_t receiver, uint32_t type)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->s[i].sender == sender && f->s[i].receiver == receiver && f->s[i].type == type)
            return &f->s[i];
    return NULL;
}

int phx_dupf_admit(phx_dupf_t *f, uint64_t sender, uint64_t receiver, uint32_t type, uint64_t tag)
{
    stream_t *s = find(f, sender, receiver, type);
    if (!s) {
        if (f->n == f->cap) {
            size_t cap = f->cap ? 2 * f->cap : 8;
            stream_t *p = realloc(f->s, cap * sizeof *p);
            if (!p)
                return PHX_ENOMEM;
            f->s = p;
            f->cap = cap;
        }
        s = &f->s[f->n++];
        *s = (stream_t){ .sender = sender, .receiver = receiver, .type = type };
    }
    if (seen(s, tag)) {
        f->dups++;
        return 0;
    }
    uint64_t d = tag - s->base;
    if (d >= PHX_DUPF_AHEAD)
        return PHX_ERANGE;
    if (d / 64 >= s->nw) {
        uint32_t nw = (uint32_t)(d / 64 + 1);
        nw = nw < 2 * s->nw ? 2 * s->nw : nw;
        uint64_t *w = realloc(s->w, (size_t)nw * sizeof *w);
        if (!w)
            return PHX_ENOMEM;
        memset(w + s->nw, 0, (size_t)(nw - s->nw) * sizeof *w);
        s->w = w;
        s->nw = nw;
    }
    s->w[d / 64] |= 1ull << (d % 64);
    /* Slide past whole seen words, then keep base the lowest missing tag
     * by shifting the map (rarely more than a word at a time). */
    uint32_t k = 0;
    while (k < s->nw && s->w[k] == UINT64_MAX)
        k++;
    if (k) {
        memmove(s->w, s->w + k, (size_t)(s->nw - k) * sizeof *s->w);
        memset(s->w + s->nw - k, 0, (size_t)k * sizeof *s->w);
        s->base += 64 * (uint64_t)k;
    }
    unsigned sh = 0;
    while (sh < 63 && s->nw && (s->w[0] >> sh & 1))
        sh++;
    if (sh) {
        for (uint32_t j = 0; j < s->nw; j++)
            s->w[j] = (s->w[j] >> sh) | (j + 1 < s->nw ? s->w[j + 1] << (64 - sh) : 0);
        s->base += sh;
    }
    return 1;
}

int phx_dupf_count(const phx_dupf_t *f, uint64_t receiver, uint32_t type, uint64_t tag)
{
    int k = 0;
    for (size_t i = 0; i < f->n; i++) {
        const stream_t *s = &f->s[i];
        if (s->receiver != receiver || s->type != type)
            continue;
        k += seen(s, tag);
    }
    return k;
}

uint64_t phx_dupf_dups(const phx_dupf_t *f)
{
    return f->dups;
}

size_t phx_dupf_packed_size(const phx_dupf_t *f)
{
    size_t k = 4 + f->n * REC;
    for (size_t i = 0; i < f->n; i++)
        k += 8 * (size_t)f->s[i].nw;
    return k;
}

long phx_dupf_pack(const phx_dupf_t *f, uint8_t *buf, size_t cap)
{
    size_t need = phx_dupf_packed_size(f);
    if (need > cap)
        return PHX_ENOSPC;
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u32(&e, (uint32_t)f->n);
    for (size_t i = 0; i < f->n; i++) {
        phx_wenc_u64(&e, f->s[i].sender);
        phx_wenc_u64(&e, f->s[i].receiver);
        phx_wenc_u64(&e, f->s[i].base);
        phx_wenc_u32(&e, f->s[i].type);
        phx_wenc_u32(&e, f->s[i].nw);
        for (uint32_t j = 0; j < f->s[i].nw; j++)
            phx_wenc_u64(&e, f->s[i].w[j]);
    }
    return (long)phx_wenc_end(&e);
}

int phx_dupf_unpack(phx_dupf_t *f, const uint8_t *buf, size_t len)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    uint32_t n = phx_wdec_u32(&d);
    if (d.err || n > phx_wdec_left(&d) / REC)
        return PHX_EPROTO;
    phx_dupf_t g = { 0 };
    int rc = 0;
    if (n && !(g.s = calloc(n, sizeof *g.s)))
        return PHX_ENOMEM;
    g.cap = n;
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (phx_wdec_left(&d) < REC) {
            rc = PHX_EPROTO;
            break;
        }
        stream_t *s = &g.s[g.n++];
        s->sender = phx_wdec_u64(&d);
        s->receiver = phx_wdec_u64(&d);
        s->base = phx_wdec_u64(&d);
        s->type = phx_wdec_u32(&d);
        uint32_t nw = phx_wdec_u32(&d);
        if (nw > PHX_DUPF_AHEAD / 64 || phx_wdec_left(&d) / 8 < nw) {
            rc = PHX_EPROTO;
            break;
        }
        if (nw && !(s->w = malloc((size_t)nw * sizeof *s->w))) {
            rc = PHX_ENOMEM;
            break;
        }
        s->nw = nw;
        for (uint32_t j = 0; j < nw; j++)
            s->w[j] = phx_wdec_u64(&d);
    }
    if (!rc && phx_wdec_end(&d, 1))
        rc = PHX_EPROTO;
    if (rc) {
        drop_streams(&g);
        return rc;
    }
    drop_streams(f);
    f->s = g.s;
    f->n = g.n;
    f->cap = g.cap;
    return 0;
}

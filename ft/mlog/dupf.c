/* Duplicate filter (dupf.h). Streams live in a plain array searched
 * linearly: a stencil task has a handful (its neighbours). */
#include "ft/mlog/dupf.h"

#include <stdlib.h>
#include <string.h>

#include "phx_err.h"
#include "phx_wire.h"

typedef struct stream {
    uint64_t sender, receiver, base, bits;
    uint32_t type;
} stream_t;

struct phx_dupf {
    stream_t *s;
    size_t n, cap;
    uint64_t dups;
};

#define REC 36   /* packed stream: sender, receiver, base, bits, type */

phx_dupf_t *phx_dupf_create(void)
{
    return calloc(1, sizeof(phx_dupf_t));
}

void phx_dupf_destroy(phx_dupf_t *f)
{
    if (f)
        free(f->s);
    free(f);
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
    if (tag < s->base) {
        f->dups++;
        return 0;
    }
    uint64_t d = tag - s->base;
    if (d >= 64)
        return PHX_ERANGE;
    if (s->bits >> d & 1) {
        f->dups++;
        return 0;
    }
    s->bits |= 1ull << d;
    /* Slide past the seen prefix: base stays the lowest missing tag. */
    while (s->bits & 1) {
        s->bits >>= 1;
        s->base++;
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
        k += tag < s->base || (tag - s->base < 64 && (s->bits >> (tag - s->base) & 1));
    }
    return k;
}

uint64_t phx_dupf_dups(const phx_dupf_t *f)
{
    return f->dups;
}

size_t phx_dupf_packed_size(const phx_dupf_t *f)
{
    return 4 + f->n * REC;
}

long phx_dupf_pack(const phx_dupf_t *f, uint8_t *buf, size_t cap)
{
    size_t need = phx_dupf_packed_size(f);
    if (need > cap)
        return PHX_ENOSPC;
    phx_put_le32(buf, (uint32_t)f->n);
    uint8_t *p = buf + 4;
    for (size_t i = 0; i < f->n; i++, p += REC) {
        phx_put_le64(p, f->s[i].sender);
        phx_put_le64(p + 8, f->s[i].receiver);
        phx_put_le64(p + 16, f->s[i].base);
        phx_put_le64(p + 24, f->s[i].bits);
        phx_put_le32(p + 32, f->s[i].type);
    }
    return (long)need;
}

int phx_dupf_unpack(phx_dupf_t *f, const uint8_t *buf, size_t len)
{
    if (len < 4)
        return PHX_EPROTO;
    uint32_t n = phx_get_le32(buf);
    if ((len - 4) / REC != n || (len - 4) % REC)
        return PHX_EPROTO;
    stream_t *s = n ? malloc((size_t)n * sizeof *s) : NULL;
    if (n && !s)
        return PHX_ENOMEM;
    const uint8_t *p = buf + 4;
    for (uint32_t i = 0; i < n; i++, p += REC)
        s[i] = (stream_t){ phx_get_le64(p), phx_get_le64(p + 8), phx_get_le64(p + 16), phx_get_le64(p + 24),
                           phx_get_le32(p + 32) };
    free(f->s);
    f->s = s;
    f->n = f->cap = n;
    return 0;
}

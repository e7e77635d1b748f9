/* Helpers shared by the fault-free detectors: the binary-heap overlay
 * (root 0, children 2r+1, 2r+2, as PaRSEC) and little-endian wire fields. */
#ifndef PHX_FT_TD_FF_UTIL_H
#define PHX_FT_TD_FF_UTIL_H

#include <stdint.h>
#include <string.h>

static inline int tdff_parent(int r) { return r ? (r - 1) / 2 : -1; }
static inline int tdff_nchildren(int r, int p)
{
    return (2 * r + 1 < p) + (2 * r + 2 < p);
}
/* Child of me on the path to its descendant d (d must be below me). */
static inline int tdff_child_toward(int me, int d)
{
    while (tdff_parent(d) != me)
        d = tdff_parent(d);
    return d;
}
static inline int tdff_is_ancestor(int a, int d)
{
    while (d > a)
        d = tdff_parent(d);
    return d == a;
}

static inline void tdff_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t tdff_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static inline void tdff_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t tdff_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

#endif

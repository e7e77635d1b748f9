/* Small helpers shared by the detectors and their test harness. */
#ifndef PHX_FT_TD_UTIL_H
#define PHX_FT_TD_UTIL_H

#include <stdlib.h>

#include "base/phx_err.h"

/* Grows the array *p of *cap elements of elem bytes to hold need, doubling
 * (amortised: no allocation per message). 0, or PHX_ENOMEM with *p intact. */
static inline int phx_td_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? 2 * *cap : 8;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q)
        return PHX_ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

#endif

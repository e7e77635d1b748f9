/* Helpers shared by the fault-free detectors: the binary-heap overlay
 * (root 0, children 2r+1, 2r+2, as PaRSEC). Wire fields: phx_wire.h. */
#ifndef PHX_FT_TD_FF_UTIL_H
#define PHX_FT_TD_FF_UTIL_H

#include "base/phx_wire.h"

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

#endif

#include "crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>

/* ISA-L picks its fastest kernel for this CPU (PCLMUL folding, SSE4.2 crc32,
 * or tables) and neither pre- nor post-inverts: the convention's inversions
 * are applied here, so calls chain. Its length is an int: feed big buffers
 * in pieces. */
uint32_t phx_crc32c(uint32_t crc, const void *p, size_t n)
{
    unsigned char *b = (unsigned char *)p;    /* ISA-L takes a non-const pointer, reads only */
    uint32_t c = ~crc;
    while (n) {
        int k = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        c = crc32_iscsi(b, k, c);
        b += k;
        n -= (size_t)k;
    }
    return ~c;
}

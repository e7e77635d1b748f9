/* CRC32C (Castagnoli, reflected poly 0x82F63B78) for frame integrity.
 *
 * Standard convention: init ~0, final xor ~0, applied inside every call, so
 * calls chain: phx_crc32c(phx_crc32c(0, a, na), b, nb) == phx_crc32c(0, a||b, na+nb).
 * Start a fresh checksum with crc = 0.
 *
 * Backed by ISA-L (libisal), which dispatches to the CPU's fastest kernel.
 * Threading: pure, callable from any thread. */
#ifndef PHX_CRC32C_H
#define PHX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t phx_crc32c(uint32_t crc, const void *p, size_t n);

/* Copies n bytes from src to dst (not overlapping) and returns
 * phx_crc32c(crc, src, n): one pass over src instead of a copy and a
 * checksum each reading it (a large payload's bytes are summed while they
 * are in the cache for the copy). */
uint32_t phx_crc32c_copy(void *dst, const void *src, size_t n, uint32_t crc);

/* The checksum of a||b from crc_a = phx_crc32c(0, a, na) and
 * crc_b = phx_crc32c(0, b, len_b), without reading either: a prefix put in
 * front of a payload summed earlier. Costs one GF(2) multiply per set bit of
 * len_b. */
uint32_t phx_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

#endif

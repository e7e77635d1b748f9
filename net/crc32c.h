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

#endif

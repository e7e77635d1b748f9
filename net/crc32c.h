/* CRC32C (Castagnoli, reflected poly 0x82F63B78) for frame integrity.
 *
 * Standard convention: init ~0, final xor ~0, applied inside every call, so
 * calls chain: phx_crc32c(phx_crc32c(0, a, na), b, nb) == phx_crc32c(0, a||b, na+nb).
 * Start a fresh checksum with crc = 0.
 *
 * Threading: all functions are pure and callable from any thread. The first
 * call picks the SSE4.2 or table implementation once (race-free). */
#ifndef PHX_CRC32C_H
#define PHX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t phx_crc32c(uint32_t crc, const void *p, size_t n);

/* The two implementations behind phx_crc32c, exposed so tests and benchmarks
 * can cross-check them. phx_crc32c_hw must only be called when
 * phx_crc32c_hw_available() returns 1. */
uint32_t phx_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t phx_crc32c_hw(uint32_t crc, const void *p, size_t n);
int phx_crc32c_hw_available(void);

#endif

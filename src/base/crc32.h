/* crc32.h: CRC-32 as zlib computes it (polynomial 0xEDB88320, reflected; Python's zlib.crc32), the
 * one checksum the results file's strings (results_text.c) and the token files' ids
 * (data/token_file.c) are summed with, so a Python reader can recompute both.
 * Must not know: any module of the program. */
#ifndef CRC32_H
#define CRC32_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of n more bytes, continued from crc (0 to start). */
static inline uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    const unsigned char *p = data;
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#endif

/* precision.h: the number format of the products' inputs, one value shared by kernels.h (the
 * projections and attention take it) and gemm.h (the products that honour it).
 *   PRECISION_FP32  the products read their operands as they are (float)
 *   PRECISION_BF16  the products' operands are rounded to bfloat16 (round to nearest even) as they
 *                   are packed, and their sums still run in float; everything else stays float
 * Zero is FP32, so a caller that sets nothing (a struct initialised by designators) gets FP32.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#ifndef KERNELS_PRECISION_H
#define KERNELS_PRECISION_H

typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } Precision;

#endif

/* describe.c: one line on what this build's kernels run on (kernels_describe in kernels.h): the
 * instruction-set path, the GEMM tile and blocking, and the thin-head attention's width limit.
 * Its own file because it reads both gemm.c and attention_thin.h, which must not read each other.
 * Must not know: the program; kernels/ includes only kernels/ headers and the C library. */
#include <stdio.h>
#include "kernels.h"
#include "gemm.h"
#include "attention_thin.h"

void kernels_describe(char *buf, size_t size) {
    const char *isa = gemm_isa_name();
    GemmBlocking b = gemm_blocking();
    char attention[64] = "attention: per-head GEMMs at every d_head";
    if (ATTENTION_THIN_MAX > 0)
        snprintf(attention, sizeof attention, "attention: thin-head path for d_head <= %d",
                 ATTENTION_THIN_MAX);
    snprintf(buf, size,
             "%s (GEMM %s, KC %d fixed; MC %d, NC %d from the caches: L1d %ld KiB, L2 %ld KiB, "
             "L3 %ld KiB%s; %s; bf16: %s)",
             isa, gemm_kernel_name(), b.kc, b.mc, b.nc, b.l1d >> 10, b.l2 >> 10, b.l3 >> 10,
             b.l2 ? "" : "; unknown, defaults assumed", attention,
             gemm_bf16_path() ? gemm_bf16_path() : "none");
}

const char *kernels_bf16_path(void) { return gemm_bf16_path(); }

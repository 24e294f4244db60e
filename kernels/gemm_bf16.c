/* gemm_bf16.c: gemm's product with bfloat16 inputs and float sums (contract in gemm_bf16.h).
 *
 * Same structure as gemm.c's packed GEMM: B is packed in KC x NC blocks into column panels of 32,
 * A in MC x KC blocks into row panels (each A panel then runs over all the B panels: it stays in
 * L1 while B streams from L2), and every operand value is rounded to bfloat16 as it is packed (vcvtne2ps2bf16: round to nearest even). The packed values sit in pairs along k, one
 * pair per 32-bit word (low half the even k), which is the layout both instruction sets take:
 *   AVX512_BF16  a 12 x 32 register tile (24 accumulators of 16 floats): per pair of k, two
 *                loads of B, twelve broadcasts of A's pair and 24 vdpbf16ps (each adds two exact
 *                bf16 products to a float lane)
 *   AMX          a 32 x 32 block of four 16 x 16 float tiles, 32 values of k per tdpbf16ps;
 *                A's panel is row-major (k pairs contiguous), K padded to 32 with zeros
 * One routine packs every operand (pack_pairs): where k or x is contiguous in the operand (all
 * the layouts the model passes), vector loads along it, and 16 x 16 blocks of words transposed in
 * registers where the panel runs the other way; element by element otherwise (the B panels of an
 * x-contiguous B: pack_x_panels, the same words row by row across the block). All round with the
 * same instruction and write the same words (tests/test_kernels.c compares them).
 * The path is the CPU's (CPUID, and for AMX the kernel's permission through arch_prctl), chosen
 * once per process. Determinism as gemm's: K is cut into fixed KC blocks, each block's sum starts
 * from zero and runs over k in one fixed order that does not depend on the element's place in
 * the tile (padding adds exact zeros), the block sums are added to C in block order, and threads
 * split only M and N (gemm.c's slabs). The two paths round differently from each other, so the
 * bits are those of the path (gemm_bf16_path names it), the same at any thread count.
 * gemm_small_bf16 (attention's per-head products) packs no B: its caller packs each operand once
 * (gemm_bf16_pack_b), and it rounds A one row tile at a time into the same pairs: on AVX512_BF16
 * the 12 x 32 tile with B read in place by masks, on AMX 16 x 32 blocks of tiles over chunks of
 * 32 values of k counted from k = 0 (see small_amx_product); the causal shapes as gemm_small's.
 * Elsewhere than x86-64 with GCC or Clang there is no path: gemm_bf16_path is NULL.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gemm_bf16.h"
#include "check.h"

enum {
    BM = 12, /* rows of the AVX512_BF16 register tile */
    BN = 32, /* columns of a B panel (both paths) */
    AM = 32, /* rows of the AMX block (two tiles of 16) */
    KC = GEMM_BF16_KC,
    MC = 384,  /* rows of A per packed block: a multiple of BM and AM */
    NC = 1024, /* columns of B per packed block: its packed pairs take 1 MiB at most */
};

typedef enum { PATH_UNKNOWN = -1, PATH_NONE = 0, PATH_AVX512 = 1, PATH_AMX = 2 } Path;
static const char *const PATH_NAMES[] = {NULL, "AVX512_BF16 12x32", "AMX 32x32"};

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define TARGET_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* The best path this CPU and kernel give: AVX-512 state enabled by the OS (XCR0 bits 1, 2, 5-7)
 * with AVX512_BF16; AMX besides when the OS enables tile state (XCR0 17, 18) and grants this
 * process its use (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; Linux only). */
static Path detect(void) {
    unsigned a, b, c, d, a1, b1, c1, d1;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return PATH_NONE; /* OSXSAVE */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1))
        return PATH_NONE;
    const int avx512 = (b >> 16 & 1) && (b >> 30 & 1) && (b >> 31 & 1); /* F, BW, VL */
    if (!avx512 || !(a1 >> 5 & 1) || (xcr0() & 0xE6) != 0xE6) return PATH_NONE;
    const int amx = (d >> 22 & 1) && (d >> 24 & 1) && (xcr0() >> 17 & 3) == 3;
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (amx && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) return PATH_AMX;
#endif
    return PATH_AVX512;
}
#else
static Path detect(void) { return PATH_NONE; }
#endif

static Path best = PATH_UNKNOWN, chosen = PATH_UNKNOWN; /* set once, then only read */

static Path path(void) {
    Path p = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (p != PATH_UNKNOWN) return p;
    p = detect(); /* a race repeats the same detection: harmless */
    __atomic_store_n(&best, p, __ATOMIC_RELEASE);
    __atomic_store_n(&chosen, p, __ATOMIC_RELEASE);
    return p;
}

const char *gemm_bf16_path(void) { return PATH_NAMES[path()]; }

int gemm_bf16_use(const char *name) {
    path();
    Path want = best;
    if (name) {
        want = PATH_NONE;
        for (int p = PATH_AVX512; p <= PATH_AMX; p++)
            if (strncmp(name, PATH_NAMES[p], strlen(name)) == 0) want = (Path)p;
        if (want == PATH_NONE || want > best) return 0; /* AMX implies AVX512_BF16, not back */
    }
    __atomic_store_n(&chosen, want, __ATOMIC_RELEASE);
    return 1;
}

#if defined(__x86_64__) && defined(__GNUC__)

/* 16 words from two rows of 16 floats: word j = bf16(even[j]) | bf16(odd[j]) << 16. */
TARGET_BF16 static inline __m512i pair_words(__m512 even, __m512 odd) {
    static const uint16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even); /* lanes 0-15 even, 16-31 odd */
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave), both);
}

_Static_assert((int)GEMM_BF16_SMALL_MR == (int)BM, "gemm_small_bf16's row tile is the 12 x 32 tile's");

static inline __mmask16 lanes(int n) { return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* r[j] <- column j of the 16 x 16 block of words r[0..16) (lane i of the result = r[i]'s lane j):
 * pairs of rows interleaved by words, then by double words, then 128-bit lanes gathered twice. */
TARGET_BF16 static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    /* u[g + j]'s 128-bit lane L holds column 4L + j of rows g .. g + 3 */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i lo02 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88),
                hi02 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        __m512i lo13 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD),
                hi13 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_i32x4(lo02, hi02, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(lo02, hi02, 0xDD);
        r[4 + j] = _mm512_shuffle_i32x4(lo13, hi13, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(lo13, hi13, 0xDD);
    }
}

/* w[i] = the 16 words of the 32 values of k at s + i * s_x (k contiguous), lo and hi masking
 * the first and last 16 values, for the nv rows i < nv; zero rows after them. Inlined with nv a
 * constant where the rows are whole, so that the block has no branch. */
TARGET_BF16 static inline __attribute__((always_inline)) void
k_rows(__m512i w[16], const float *s, ptrdiff_t s_x, int nv, __mmask16 lo, __mmask16 hi) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        w[i] = i < nv ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, s + i * s_x + 16),
                                                     _mm512_maskz_loadu_ps(lo, s + i * s_x))
                      : _mm512_setzero_si512();
}

/* pack_pairs's contract (below) where k is contiguous (s_k == 1): 32 values of k of one x are 16
 * words of that x in order (one vcvtne2ps2bf16). Stored as they are where the pairs of an x are
 * contiguous (d_kp == 1: the AMX A panel); else, x contiguous (d_x == 1: B's panels, the 12-row
 * tiles), 16 x by 16 pairs transposed in registers, so that each pair's row of x is one masked
 * store (a scatter of each x's words was twice as slow). Any other destination scatters. */
TARGET_BF16 static void pack_k_contiguous(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn,
                                          const float *src, ptrdiff_t s_x, int n, int kc) {
    if (d_kp == 1 || d_x != 1) {
        const __m512i scatter =
            _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                               _mm512_set1_epi32((int)d_kp));
        for (int x = 0; x < width; x++)
            for (int kp0 = 0; kp0 < kpn; kp0 += 16) {
                const float *s = src + (ptrdiff_t)(x < n ? x : 0) * s_x + 2 * kp0;
                int left = x < n ? kc - 2 * kp0 : 0;
                __m512i w = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(lanes(left - 16), s + 16),
                                                         _mm512_maskz_loadu_ps(lanes(left), s));
                __mmask16 m = lanes(kpn - kp0);
                uint32_t *d = dst + (ptrdiff_t)kp0 * d_kp + (ptrdiff_t)x * d_x;
                if (d_kp == 1) _mm512_mask_storeu_epi32(d, m, w);
                else _mm512_mask_i32scatter_epi32(d, m, scatter, w, 4);
            }
        return;
    }
    for (int x0 = 0; x0 < width; x0 += 16) {
        const int last = n < width ? n : width, nv = last - x0 < 0 ? 0 : last - x0 > 16 ? 16 : last - x0;
        const __mmask16 m = lanes(width - x0);
        const float *s = src + (ptrdiff_t)(nv > 0 ? x0 : 0) * s_x;
        for (int kp0 = 0; kp0 < kpn; kp0 += 16) {
            const __mmask16 lo = lanes(kc - 2 * kp0), hi = lanes(kc - 2 * kp0 - 16);
            __m512i w[16];
            if (nv == 16) k_rows(w, s + 2 * kp0, s_x, 16, lo, hi);
            else if (nv == BM) k_rows(w, s + 2 * kp0, s_x, BM, lo, hi);
            else k_rows(w, s + 2 * kp0, s_x, nv, lo, hi);
            transpose16(w);
            const int pairs = kpn - kp0;
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < pairs) _mm512_mask_storeu_epi32(dst + (ptrdiff_t)(kp0 + j) * d_kp + x0, m, w[j]);
        }
    }
}

/* The words of the pairs (k, k + 1) of 16 x at s (x contiguous, rows of k s_k apart), the lanes
 * outside `in` zero; a row at or past kc reads as zeros. */
TARGET_BF16 static inline __m512i x_pair(const float *s, ptrdiff_t s_k, int k, int kc, __mmask16 in) {
    __m512 even = _mm512_maskz_loadu_ps(k < kc ? in : 0, s + (ptrdiff_t)(k < kc ? k : 0) * s_k);
    __m512 odd = _mm512_maskz_loadu_ps(k + 1 < kc ? in : 0, s + (ptrdiff_t)(k + 1 < kc ? k + 1 : 0) * s_k);
    return pair_words(even, odd);
}

/* x_pair's words for the pair kp (k = 2 kp): two plain masked loads where both rows are below kc
 * (kp < whole: all but the last one or two pairs), x_pair's tests of k otherwise. */
TARGET_BF16 static inline __m512i x_pair_at(const float *s, ptrdiff_t s_k, int kp, int whole, int kc,
                                            __mmask16 in) {
    if (kp >= whole) return x_pair(s, s_k, 2 * kp, kc, in);
    const float *e = s + (ptrdiff_t)(2 * kp) * s_k;
    return pair_words(_mm512_maskz_loadu_ps(in, e), _mm512_maskz_loadu_ps(in, e + s_k));
}

/* pack_pairs's contract where x is contiguous (s_x == 1) and so is one side of the destination:
 * the 16 x of k and of k + 1 are two masked loads, and pair_words makes their 16 words. Stored as
 * they are where x is contiguous (d_x == 1); where the pairs are (d_kp == 1: the AMX A panel of a
 * transposed A), 16 pairs by 16 x transposed in registers first. The pairs whose k are both
 * below kc (all but the last one or two blocks) take no test of k. */
TARGET_BF16 static void pack_x_contiguous(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn,
                                          const float *src, ptrdiff_t s_k, int n, int kc) {
    const int whole = kc / 2 < kpn ? kc / 2 : kpn; /* pairs with both k below kc */
    const int last = n < width ? n : width;
    if (d_x == 1) {
        for (int x0 = 0; x0 < width; x0 += 16) {
            const __mmask16 m = lanes(width - x0), in = lanes(last - x0);
            const float *s = src + (last > x0 ? x0 : 0);
            for (int kp = 0; kp < kpn; kp++)
                _mm512_mask_storeu_epi32(dst + (ptrdiff_t)kp * d_kp + x0, m,
                                         x_pair_at(s, s_k, kp, whole, kc, in));
        }
        return;
    }
    /* 32 rows of k at a time across the whole width, so that a block of many x (the AMX A block of
     * a transposed A, packed in one call) reads each row of src in order */
    for (int kp0 = 0; kp0 < kpn; kp0 += 16)
        for (int x0 = 0; x0 < width; x0 += 16) {
            const __mmask16 in = lanes(last - x0);
            const float *s = src + (last > x0 ? x0 : 0);
            const int rows = width - x0;
            __m512i w[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) w[i] = x_pair_at(s, s_k, kp0 + i, whole, kc, in);
            transpose16(w);
            const __mmask16 pairs = lanes(kpn - kp0);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < rows) _mm512_mask_storeu_epi32(dst + (ptrdiff_t)(x0 + j) * d_x + kp0, pairs, w[j]);
        }
}

/* The B panels of a block (pack_pairs of each BN columns; panel p at dst + p * panel, its pair kp
 * at kp * BN) where x is contiguous in src: row pair by row pair across all the panels, so that
 * src is read in its own order (a panel at a time read 64 bytes of each of kc rows, a new page a
 * row where the rows are long, and the pages outran the TLB). The same words as pack_pairs. */
TARGET_BF16 static void pack_x_panels(uint32_t *dst, ptrdiff_t panel, int kpad, const float *src,
                                      ptrdiff_t s_k, int n, int kc) {
    const int whole = kc / 2 < kpad ? kc / 2 : kpad, width = (n + BN - 1) / BN * BN;
    for (int kp = 0; kp < kpad; kp++) {
        uint32_t *d = dst + (ptrdiff_t)kp * BN;
        for (int x0 = 0; x0 < width; x0 += 16) {
            const __m512i w = x_pair_at(src + (n > x0 ? x0 : 0), s_k, kp, whole, kc, lanes(n - x0));
            _mm512_storeu_si512(d + (ptrdiff_t)(x0 / BN) * panel + x0 % BN, w);
        }
    }
}

/* dst[kp * d_kp + x * d_x] = the pair (S(x, 2kp), S(x, 2kp + 1)) rounded to bf16, for x < width
 * and kp < kpn, with S(x, k) = src[x * s_x + k * s_k] where x < n and k < kc, zero elsewhere.
 * Where k or x is contiguous in src (every operand the products take) a vector path above packs
 * it; otherwise the pairs are gathered element by element (width <= BN + AM). All round with the
 * one instruction (vcvtne2ps2bf16) and write the same words. */
TARGET_BF16 static void pack_pairs(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn,
                                   const float *src, ptrdiff_t s_x, ptrdiff_t s_k, int n, int kc) {
    if (s_k == 1) {
        pack_k_contiguous(dst, d_kp, d_x, width, kpn, src, s_x, n, kc);
        return;
    }
    if (s_x == 1 && (d_x == 1 || d_kp == 1)) {
        pack_x_contiguous(dst, d_kp, d_x, width, kpn, src, s_k, n, kc);
        return;
    }
    float even[BN + AM], odd[BN + AM]; /* a gathered pair of k rows (width <= 32) */
    uint32_t words[BN + AM];
    CHECK(width <= BN + AM);
    for (int kp = 0; kp < kpn; kp++) {
        const int k = 2 * kp;
        for (int x = 0; x < width; x++) {
            even[x] = x < n && k < kc ? src[x * s_x + k * s_k] : 0.0f;
            odd[x] = x < n && k + 1 < kc ? src[x * s_x + (k + 1) * s_k] : 0.0f;
        }
        for (int x0 = 0; x0 < width; x0 += 16) {
            __mmask16 m = lanes(width - x0);
            __m512i w = pair_words(_mm512_maskz_loadu_ps(m, even + x0), _mm512_maskz_loadu_ps(m, odd + x0));
            if (d_x == 1) _mm512_mask_storeu_epi32(dst + (ptrdiff_t)kp * d_kp + x0, m, w);
            else _mm512_mask_storeu_epi32(words + x0, m, w);
        }
        if (d_x != 1)
            for (int x = 0; x < width; x++) dst[(ptrdiff_t)kp * d_kp + (ptrdiff_t)x * d_x] = words[x];
    }
}

/* c[0..mr, 0..nr) = (load_c ? c : c_init ? the c_init row : 0) + acc, acc a 32-column row block. */
TARGET_BF16 static inline void store_row(float *c, __m512 acc0, __m512 acc1, int nr, int load_c,
                                         const float *c_init) {
    __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
    if (load_c) {
        acc0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), acc0);
        acc1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), acc1);
    } else if (c_init) {
        acc0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c_init), acc0);
        acc1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c_init + 16), acc1);
    }
    _mm512_mask_storeu_ps(c, m0, acc0);
    _mm512_mask_storeu_ps(c + 16, m1, acc1);
}

/* One 12 x 32 tile over kpn pairs: ap[kp][12] words, bp[kp][32] words. */
TARGET_BF16 static void tile_avx512(int kpn, const uint32_t *ap, const uint32_t *bp, float *c, ptrdiff_t ldc,
                                    int mr, int nr, int load_c, const float *c_init) {
    __m512 acc[BM][2];
#pragma GCC unroll 12
    for (int i = 0; i < BM; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int kp = 0; kp < kpn; kp++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(bp), b1 = (__m512bh)_mm512_load_si512(bp + 16);
#pragma GCC unroll 12
        for (int i = 0; i < BM; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
        }
        ap += BM;
        bp += BN;
    }
    for (int i = 0; i < mr; i++) store_row(c + i * ldc, acc[i][0], acc[i][1], nr, load_c, c_init);
}

/* One 32 x 32 block over kpn pairs (a multiple of 16): ap row-major [32][lda] words, bp[kp][32]. */
TARGET_AMX static void tile_amx(int kpn, const uint32_t *ap, ptrdiff_t lda, const uint32_t *bp, float *c,
                                ptrdiff_t ldc, int mr, int nr, int load_c, const float *c_init) {
    float out[AM][BN] __attribute__((aligned(64)));
    __asm__ volatile("" ::
                         : "memory"); /* the tile instructions' asm names no memory: the packed
                                         * panels must be written before, out read after */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int kp0 = 0; kp0 < kpn; kp0 += 16) {
        _tile_loadd(4, ap + kp0, lda * 4);
        _tile_loadd(5, ap + 16 * lda + kp0, lda * 4);
        _tile_loadd(6, bp + (ptrdiff_t)kp0 * BN, BN * 4);
        _tile_loadd(7, bp + (ptrdiff_t)kp0 * BN + 16, BN * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, &out[0][0], BN * 4);
    _tile_stored(1, &out[0][16], BN * 4);
    _tile_stored(2, &out[16][0], BN * 4);
    _tile_stored(3, &out[16][16], BN * 4);
    __asm__ volatile("" ::: "memory");
    for (int i = 0; i < mr; i++)
        store_row(c + i * ldc, _mm512_load_ps(out[i]), _mm512_load_ps(out[i] + 16), nr, load_c, c_init);
}

/* Palette 1, tiles 0-7 all 16 rows of 64 bytes. */
TARGET_AMX static void amx_begin(void) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } __attribute__((packed, aligned(64))) cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    /* the whole struct as the operand: the intrinsic's names only its first bytes, and GCC then
     * drops the stores to the rest */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}
TARGET_AMX static void amx_end(void) { _tile_release(); }

/* Palette 1 stays loaded between calls on a thread (ldtilecfg and tilerelease cost more than a
 * small product's tile loads); `product` releases the tiles and clears the flag. */
static _Thread_local int amx_configured;

static void *alloc_words(size_t n) {
    void *p = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
    CHECK_ALLOC(p != NULL);
    return p;
}

/* The product on path p (AVX512 or AMX), gemm's blocking with this file's panels. */
static void product(Path p, float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                    const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate,
                    const float *bias) {
    const int amx = p == PATH_AMX, rows = amx ? AM : BM, kp_unit = amx ? 16 : 1;
    const int kpad_max = ((K < KC ? K : KC) + 1) / 2 + kp_unit - 1;
    uint32_t *bp = alloc_words((size_t)kpad_max * (N < NC ? (N + BN - 1) / BN * BN : NC));
    uint32_t *ap = alloc_words((size_t)kpad_max * (M < MC ? (M + rows - 1) / rows * rows : MC));
    if (amx) amx_begin();
    for (int jc = 0; jc < N; jc += NC) {
        int nc = N - jc < NC ? N - jc : NC;
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC, kpn = (kc + 1) / 2,
                kpad = (kpn + kp_unit - 1) / kp_unit * kp_unit;
            int load_c = accumulate || pc > 0;
            if (b_cs == 1 && b_rs != 1)
                pack_x_panels(bp, (ptrdiff_t)BN * kpad, kpad, b + pc * b_rs + jc, b_rs, nc, kc);
            else
                for (int jr = 0; jr < nc; jr += BN)
                    pack_pairs(bp + (size_t)jr * kpad, BN, 1, BN, kpad, b + pc * b_rs + (jc + jr) * b_cs,
                               b_cs, b_rs, nc - jr, kc);
            for (int ic = 0; ic < M; ic += MC) {
                int mc = M - ic < MC ? M - ic : MC;
                if (amx && a_rs == 1 && a_cs != 1) /* one row-major block: x contiguous, read in row order */
                    pack_pairs(ap, 1, kpad, (mc + AM - 1) / AM * AM, kpad, a + ic * a_rs + pc * a_cs, a_rs,
                               a_cs, mc, kc);
                else
                    for (int ir = 0; ir < mc; ir += rows)
                        pack_pairs(ap + (size_t)ir * kpad, amx ? 1 : BM, amx ? kpad : 1, rows, kpad,
                                   a + (ic + ir) * a_rs + pc * a_cs, a_rs, a_cs, mc - ir, kc);
                for (int ir = 0; ir < mc; ir += rows) {
                    int mr = mc - ir < rows ? mc - ir : rows;
                    for (int jr = 0; jr < nc; jr += BN) {
                        int nr = nc - jr < BN ? nc - jr : BN;
                        float *cij = c + (ic + ir) * ldc + jc + jr;
                        const float *bias_j = bias ? bias + jc + jr : NULL;
                        if (amx)
                            tile_amx(kpad, ap + (size_t)ir * kpad, kpad, bp + (size_t)jr * kpad, cij, ldc, mr,
                                     nr, load_c, bias_j);
                        else
                            tile_avx512(kpad, ap + (size_t)ir * kpad, bp + (size_t)jr * kpad, cij, ldc, mr,
                                        nr, load_c, bias_j);
                    }
                }
            }
        }
    }
    if (amx) amx_end(), amx_configured = 0;
    free(ap);
    free(bp);
}

void gemm_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
               ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate, const float *bias) {
    const Path p = path();
    CHECK(p != PATH_NONE); /* callers ask gemm_bf16_path first */
    if (M <= 0 || N <= 0) return;
    if (bias) accumulate = 0;
    if (K <= 0) { /* an empty sum: C = the bias rows, zeros, or unchanged */
        for (int i = 0; i < M && !accumulate; i++)
            for (int j = 0; j < N; j++) c[i * ldc + j] = bias ? bias[j] : 0.0f;
        return;
    }
    product(p, c, ldc, a, a_rs, a_cs, b, b_rs, b_cs, M, N, K, accumulate, bias);
}

/* ---------------------------------------------------------------- gemm_small_bf16
 * One 12 x nr tile (nr <= 16 nv) over kpn pairs: A packed ap[kp][12], B's words bp[kp * ldb + j]
 * read with masks (no column past nr). accumulate as gemm_small's: 0 stores, 1 adds to C,
 * GEMM_CONTINUE starts the chains from C. */
TARGET_BF16 static inline __attribute__((always_inline)) void small_tile(int nv, int kpn, const uint32_t *ap,
                                                                         const uint32_t *bp, ptrdiff_t ldb,
                                                                         float *c, ptrdiff_t ldc, int mr,
                                                                         int nr, int accumulate) {
    const __mmask16 m0 = lanes(nr), m1 = nv > 1 ? lanes(nr - 16) : 0;
    __m512 acc[BM][2];
#pragma GCC unroll 12
    for (int i = 0; i < BM; i++) {
        const int cont = accumulate == GEMM_CONTINUE && i < mr;
        acc[i][0] = cont ? _mm512_maskz_loadu_ps(m0, c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = cont && nv > 1 ? _mm512_maskz_loadu_ps(m1, c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int kp = 0; kp < kpn; kp++) {
        __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, bp), b1 = b0;
        if (nv > 1) b1 = (__m512bh)_mm512_maskz_loadu_epi32(m1, bp + 16);
#pragma GCC unroll 12
        for (int i = 0; i < BM; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
            if (nv > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
        }
        ap += BM;
        bp += ldb;
    }
    for (int i = 0; i < mr; i++) store_row(c + i * ldc, acc[i][0], acc[i][1], nr, accumulate == 1, NULL);
}
TARGET_BF16 static void small_tile_narrow(int kpn, const uint32_t *ap, const uint32_t *bp, ptrdiff_t ldb,
                                          float *c, ptrdiff_t ldc, int mr, int nr, int accumulate) {
    small_tile(1, kpn, ap, bp, ldb, c, ldc, mr, nr, accumulate);
}
TARGET_BF16 static void small_tile_wide(int kpn, const uint32_t *ap, const uint32_t *bp, ptrdiff_t ldb,
                                        float *c, ptrdiff_t ldc, int mr, int nr, int accumulate) {
    small_tile(2, kpn, ap, bp, ldb, c, ldc, mr, nr, accumulate);
}

/* gemm_small_bf16 on AMX. Row tiles of SM = 16 rows (one A tile, packed row-major: each row's
 * pairs contiguous), column tiles of 16 taken two at a time, K in chunks of SK = 16 pairs (32
 * values of k: one tdpbf16ps) counted from the call's k = 0 whatever the row tile's k range, so
 * that every element sees the same chunks. tdpbf16ps adds a chunk's 32 products to C as a whole,
 * not pair by pair (it does not round as a chain of vdpbf16ps would), so a chunk's boundaries
 * decide the bits: a tile's range is widened to whole chunks with exact zeros in both operands
 * (A packed with zeros, B's rows outside the range or past N copied into a zeroed tile), and the
 * chunks a tile skips are all-zero ones, which leave C as it is. */
enum { SM = 16, SK = 16 };
_Static_assert(2 * SK == GEMM_BF16_SMALL_SPLIT, "a chunk of k is where gemm_small_bf16 continues exactly");

/* One 16 x nr block of C (nr <= 32) at columns [j0, j0 + nr): the packed A rows (lda words each,
 * pairs a0 .. a0 + lda) times B's pairs [kp_lo, kp_hi) (B's words bp[kp * ldb + j], j < N). */
TARGET_AMX static void small_amx(const uint32_t *ap, ptrdiff_t lda, int a0, const uint32_t *bp, ptrdiff_t ldb,
                                 int kp_lo, int kp_hi, int N, int j0, float *c, ptrdiff_t ldc, int mr, int nr,
                                 int accumulate) {
    float out[SM][2 * 16] __attribute__((aligned(64)));
    uint32_t pad[SK][16] __attribute__((aligned(64)));
    const int two = nr > 16;
    if (accumulate == GEMM_CONTINUE) {
        for (int i = 0; i < SM; i++) {
            const float *ci = c + (i < mr ? i : 0) * ldc;
            _mm512_store_ps(out[i], _mm512_maskz_loadu_ps(i < mr ? lanes(nr) : 0, ci));
            _mm512_store_ps(out[i] + 16, _mm512_maskz_loadu_ps(i < mr ? lanes(nr - 16) : 0, ci + 16));
        }
        __asm__ volatile("" ::: "memory"); /* tile loads name no memory: out written before */
        _tile_loadd(0, &out[0][0], sizeof out[0]);
        _tile_loadd(1, &out[0][16], sizeof out[0]);
    } else {
        _tile_zero(0);
        _tile_zero(1);
    }
    for (int c0 = a0; c0 < kp_hi; c0 += SK) {
        _tile_loadd(2, ap + (c0 - a0), lda * 4);
        const int whole = c0 >= kp_lo && c0 + SK <= kp_hi;
        for (int t = 0; t <= two; t++) {
            const int jt = j0 + 16 * t;
            if (whole && jt + 16 <= N) {
                if (t == 0) _tile_loadd(3, bp + (ptrdiff_t)c0 * ldb + jt, ldb * 4);
                else _tile_loadd(4, bp + (ptrdiff_t)c0 * ldb + jt, ldb * 4);
                continue;
            }
            const __mmask16 m = lanes(N - jt);
            for (int r = 0; r < SK; r++) {
                const int kp = c0 + r, in = kp >= kp_lo && kp < kp_hi;
                _mm512_store_si512(
                    pad[r], _mm512_maskz_loadu_epi32(in ? m : 0, bp + (in ? (ptrdiff_t)kp * ldb + jt : 0)));
            }
            __asm__ volatile("" ::: "memory");
            if (t == 0) _tile_loadd(3, &pad[0][0], sizeof pad[0]);
            else _tile_loadd(4, &pad[0][0], sizeof pad[0]);
            __asm__ volatile("" ::: "memory"); /* pad is loaded before it is written again */
        }
        _tile_dpbf16ps(0, 2, 3);
        if (two) _tile_dpbf16ps(1, 2, 4);
    }
    _tile_stored(0, &out[0][0], sizeof out[0]);
    _tile_stored(1, &out[0][16], sizeof out[0]);
    __asm__ volatile("" ::: "memory"); /* out read after the tile stores */
    for (int i = 0; i < mr; i++)
        store_row(c + i * ldc, _mm512_load_ps(out[i]), _mm512_load_ps(out[i] + 16), nr, accumulate == 1,
                  NULL);
}

/* Asks for the lines of C that row tile [i0, i0 + mr) will store, for writing (called for the
 * next row tile while the current one computes). The products whose rows are d_head wide write
 * rows of buffers in no cache (the heads' outputs, d_qkv), and each block's stores waited for
 * their lines: at D512, dK's and dV's blocks took 1,760 cycles, 890 with this. Rows wider than
 * C_PREFETCH_BYTES (the scores, into panels that are in cache) are left. FP32's gemm_small gained
 * nothing from it (its tiles take long enough to hide the misses). */
enum { C_PREFETCH_BYTES = 16 << 10 };
static void prefetch_c(const float *c, ptrdiff_t ldc, GemmShape shape, int diag, int i0, int mr, int N,
                       int K) {
    int k_lo, k_hi, n_hi;
    gemm_shape_range(shape, diag, i0, mr, N, K, &k_lo, &k_hi, &n_hi);
    if (mr <= 0 || n_hi <= 0 || (size_t)mr * n_hi * sizeof(float) > C_PREFETCH_BYTES) return;
    for (int i = i0; i < i0 + mr; i++) {
        const float *row = c + (ptrdiff_t)i * ldc;
        for (int j = 0; j < n_hi; j += 16) __builtin_prefetch(row + j, 1, 3);
        __builtin_prefetch(row + n_hi - 1, 1, 3); /* the last line, where the row starts mid-line */
    }
}

TARGET_AMX static void small_amx_product(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs,
                                         ptrdiff_t a_cs, const uint32_t *bp, ptrdiff_t ldb, int M, int N,
                                         int K, int accumulate, GemmShape shape, int diag,
                                         uint32_t *scratch) {
    if (!amx_configured) amx_begin(), amx_configured = 1;
    for (int i0 = 0; i0 < M; i0 += SM) {
        int mr = M - i0 < SM ? M - i0 : SM, k_lo, k_hi, n_hi;
        gemm_shape_range(shape, diag, i0, mr, N, K, &k_lo, &k_hi, &n_hi);
        CHECK(k_lo % 2 == 0 || k_lo == k_hi); /* the pairs of A and B start at even k */
        if (i0 == 0) prefetch_c(c, ldc, shape, diag, 0, mr, N, K);
        if (i0 + SM < M) prefetch_c(c, ldc, shape, diag, i0 + SM, M - i0 - SM < SM ? M - i0 - SM : SM, N, K);
        /* A's rows hold the pairs a0 .. a0 + lda: whole chunks, zero outside [kp_lo, kp_hi) */
        const int kp_lo = k_lo / 2, kp_hi = k_hi > k_lo ? (k_hi + 1) / 2 : kp_lo, a0 = kp_lo / SK * SK,
                  lda = kp_hi > kp_lo ? (kp_hi - a0 + SK - 1) / SK * SK : 0;
        for (int x = 0; x < SM && lda > 0 && kp_lo > a0; x++)
            memset(scratch + (ptrdiff_t)x * lda, 0, sizeof(uint32_t) * (kp_lo - a0));
        if (lda > 0)
            pack_pairs(scratch + (kp_lo - a0), 1, lda, SM, lda - (kp_lo - a0), a + i0 * a_rs + k_lo * a_cs,
                       a_rs, a_cs, mr, k_hi - k_lo);
        for (int j0 = 0; j0 < n_hi; j0 += 2 * 16)
            small_amx(scratch, lda, a0, bp, ldb, kp_lo, kp_hi > kp_lo ? kp_hi : a0, N, j0, c + i0 * ldc + j0,
                      ldc, mr, n_hi - j0 < 32 ? n_hi - j0 : 32, accumulate);
    }
}

int gemm_small_bf16_rows(void) { return path() == PATH_AMX ? SM : BM; }

void gemm_small_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                     const uint32_t *bp, ptrdiff_t ldb, int M, int N, int K, int accumulate, GemmShape shape,
                     int diag, uint32_t *scratch) {
    CHECK(path() != PATH_NONE);
    if (path() == PATH_AMX) {
        small_amx_product(c, ldc, a, a_rs, a_cs, bp, ldb, M, N, K, accumulate, shape, diag, scratch);
        return;
    }
    for (int i0 = 0; i0 < M; i0 += BM) {
        int mr = M - i0 < BM ? M - i0 : BM, k_lo, k_hi, n_hi;
        gemm_shape_range(shape, diag, i0, mr, N, K, &k_lo, &k_hi, &n_hi);
        CHECK(k_lo % 2 == 0 || k_lo == k_hi); /* the pairs of A and B start at even k */
        const int kpn = (k_hi - k_lo + 1) / 2;
        pack_pairs(scratch, BM, 1, BM, kpn, a + i0 * a_rs + k_lo * a_cs, a_rs, a_cs, mr, k_hi - k_lo);
        const uint32_t *bk = bp + (ptrdiff_t)(k_lo / 2) * ldb;
        for (int j0 = 0; j0 < n_hi; j0 += BN) {
            int nr = n_hi - j0 < BN ? n_hi - j0 : BN;
            (nr > 16 ? small_tile_wide : small_tile_narrow)(kpn, scratch, bk + j0, ldb, c + i0 * ldc + j0,
                                                            ldc, mr, nr, accumulate);
        }
    }
}

void gemm_bf16_pack_pairs(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn, const float *src,
                          ptrdiff_t s_x, ptrdiff_t s_k, int n, int kc) {
    CHECK(path() != PATH_NONE);
    pack_pairs(dst, d_kp, d_x, width, kpn, src, s_x, s_k, n, kc);
}

void gemm_bf16_pack_b(uint32_t *dst, ptrdiff_t ldb, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int K,
                      int N) {
    CHECK(path() != PATH_NONE);
    for (int j0 = 0; j0 < N; j0 += BN) /* pack_pairs gathers at most BN + AM columns at a time */
        pack_pairs(dst + j0, ldb, 1, N - j0 < BN ? N - j0 : BN, (K + 1) / 2, b + j0 * b_cs, b_cs, b_rs,
                   N - j0 < BN ? N - j0 : BN, K);
}

#else

int gemm_small_bf16_rows(void) { return BM; }

void gemm_small_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                     const uint32_t *bp, ptrdiff_t ldb, int M, int N, int K, int accumulate, GemmShape shape,
                     int diag, uint32_t *scratch) {
    (void)c, (void)ldc, (void)a, (void)a_rs, (void)a_cs, (void)bp, (void)ldb, (void)M, (void)N, (void)K;
    (void)accumulate, (void)shape, (void)diag, (void)scratch;
    CHECK(!"gemm_small_bf16: no bfloat16 path in this build");
}

void gemm_bf16_pack_b(uint32_t *dst, ptrdiff_t ldb, const float *b, ptrdiff_t b_rs, ptrdiff_t b_cs, int K,
                      int N) {
    (void)dst, (void)ldb, (void)b, (void)b_rs, (void)b_cs, (void)K, (void)N;
    CHECK(!"gemm_bf16_pack_b: no bfloat16 path in this build");
}

void gemm_bf16_pack_pairs(uint32_t *dst, ptrdiff_t d_kp, ptrdiff_t d_x, int width, int kpn, const float *src,
                          ptrdiff_t s_x, ptrdiff_t s_k, int n, int kc) {
    (void)dst, (void)d_kp, (void)d_x, (void)width, (void)kpn, (void)src, (void)s_x, (void)s_k, (void)n,
        (void)kc;
    CHECK(!"gemm_bf16_pack_pairs: no bfloat16 path in this build");
}

void gemm_bf16(float *c, ptrdiff_t ldc, const float *a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float *b,
               ptrdiff_t b_rs, ptrdiff_t b_cs, int M, int N, int K, int accumulate, const float *bias) {
    (void)c, (void)ldc, (void)a, (void)a_rs, (void)a_cs, (void)b, (void)b_rs, (void)b_cs;
    (void)M, (void)N, (void)K, (void)accumulate, (void)bias;
    CHECK(!"gemm_bf16: no bfloat16 path in this build");
}

#endif

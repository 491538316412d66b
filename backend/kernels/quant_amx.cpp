#include "quant_amx.h"

#include "amx.h"
#include "amx_emulated.h"
#include "quant_amx_tiles.h"

#ifdef DG_AMX_COMPILED
#include <immintrin.h>
#endif

namespace dg::kernels::amx {

#ifdef DG_AMX_COMPILED

namespace {

// The tile instructions in these functions only (the file is compiled without AMX flags; so is ggml-cpu,
// tests/test_build_rules.py). The intrinsics take their tile numbers as literals (GCC spells them into
// the assembly), hence the cases.
#define DG_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl")))
#define DG_TILE_CASES(T, OP)             \
    if constexpr ((T) == 0) OP(0);       \
    else if constexpr ((T) == 1) OP(1);  \
    else if constexpr ((T) == 2) OP(2);  \
    else if constexpr ((T) == 3) OP(3);  \
    else if constexpr ((T) == 4) OP(4);  \
    else if constexpr ((T) == 5) OP(5);  \
    else if constexpr ((T) == 6) OP(6);  \
    else OP(7)

struct RealTiles {
    // Not _tile_loadconfig: GCC 12's intrinsic gives its asm the operand *(const void**)config, so
    // the compiler sees 8 of the 64 bytes read and drops the stores of the rows and widths as dead
    // (then the first TILELOADD faults: tiles not configured). The operand here is the whole config.
    DG_AMX_TARGET void config(const TileConfig& cfg) { __asm__ volatile("ldtilecfg %0" : : "m"(cfg)); }
    template <int T>
    DG_AMX_TARGET void zero() {
        static_assert(T >= 0 && T < 8);
#define DG_ZERO(n) _tile_zero(n)
        DG_TILE_CASES(T, DG_ZERO);
#undef DG_ZERO
    }
    template <int T>
    DG_AMX_TARGET void load(const void* p, size_t stride) {
        static_assert(T >= 0 && T < 8);
#define DG_LOAD(n) _tile_loadd(n, p, stride)
        DG_TILE_CASES(T, DG_LOAD);
#undef DG_LOAD
    }
    template <int T>
    DG_AMX_TARGET void store(void* p, size_t stride) {
        static_assert(T >= 0 && T < 8);
#define DG_STORE(n) _tile_stored(n, p, stride)
        DG_TILE_CASES(T, DG_STORE);
#undef DG_STORE
    }
    // the four products of amx_tile_config.h's layout
    template <int C, int A, int B>
    DG_AMX_TARGET void dpbssd() {
        static_assert(C < 4 && A == a_tile(C / 2) && B == b_tile(C % 2),
                      "C = c_tile(i, j), A = a_tile(i), B = b_tile(j)");
        if constexpr (C == 0) _tile_dpbssd(0, 4, 6);
        else if constexpr (C == 1) _tile_dpbssd(1, 4, 7);
        else if constexpr (C == 2) _tile_dpbssd(2, 5, 6);
        else _tile_dpbssd(3, 5, 7);
    }
    DG_AMX_TARGET void release() { _tile_release(); }
};

#undef DG_TILE_CASES
#undef DG_AMX_TARGET

}  // namespace

void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    RealTiles t;  // the configuration is this thread's: loaded here, released at the end
    tile_gemm(t, type, M, N, K, A, lda, W, ldw, C, ldc);
}

#else  // no tile code in this build: amx_int8() is false, never called

void quant_gemm_nt(ggml_type, int64_t, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

#endif

void quant_gemm_nt_emulated(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                            const char* W, size_t ldw, float* C, int64_t ldc) {
    EmulatedTiles t;
    tile_gemm(t, type, M, N, K, A, lda, W, ldw, C, ldc);
}

bool supports(ggml_type type) { return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0; }

}  // namespace dg::kernels::amx

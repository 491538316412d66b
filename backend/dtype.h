// Logical data types (the IR's) and how they live inside ggml.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg {

// Same codes as dyngraph.fb.DataType.
enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, Bool = 5, U8 = 6, S8 = 7, S4 = 8, U4 = 9,
                              F8E4M3 = 10, F8E5M2 = 11 };
constexpr int kNumDTypes = 12;

// Same codes as dyngraph.fb.StorageType.
enum class Storage : uint8_t {
    Default = 0, F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
    IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0, MXFP4
};
constexpr int kNumStorage = 26;

inline size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 4;
        case DType::F16: case DType::BF16: return 2;
        case DType::I64: return 8;
        case DType::Bool: case DType::U8: case DType::S8: case DType::S4: case DType::U4: case DType::F8E4M3:
        case DType::F8E5M2: return 1;
    }
    return 0;
}

inline const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F16: return "f16";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::I64: return "i64";
        case DType::Bool: return "bool";
        case DType::U8: return "u8";
        case DType::S8: return "s8";
        case DType::S4: return "s4";
        case DType::U4: return "u4";
        case DType::F8E4M3: return "f8_e4m3";
        case DType::F8E5M2: return "f8_e5m2";
    }
    return "?";
}

// Inside ggml, i64 and bool values are held as i32 (ggml computes on 32-bit
// integers); they are converted at the partition's boundary. u8, s8, s4, u4,
// f8_e4m3 and f8_e5m2 are held as their bytes in I8 tensors (one byte an
// element, as the host holds them: dtypes.py): only our own kernels compute
// on them (kernels/quantize.h, kernels/int8_gemm.h), which know the type from
// the IR; ggml itself only moves them (views, reshapes, copies).
inline ggml_type ggml_type_of(DType t) {
    switch (t) {
        case DType::F32: return GGML_TYPE_F32;
        case DType::F16: return GGML_TYPE_F16;
        case DType::BF16: return GGML_TYPE_BF16;
        case DType::I32: case DType::I64: case DType::Bool: return GGML_TYPE_I32;
        case DType::U8: case DType::S8: case DType::S4: case DType::U4: case DType::F8E4M3: case DType::F8E5M2:
            return GGML_TYPE_I8;
    }
    return GGML_TYPE_F32;
}

// Whether host data of this dtype has the bytes ggml holds (no conversion needed).
inline bool host_matches_ggml(DType t) { return t != DType::I64 && t != DType::Bool; }

inline ggml_type ggml_type_of(Storage s, DType logical) {
    switch (s) {
        case Storage::Default: return ggml_type_of(logical);
        case Storage::F32: return GGML_TYPE_F32;
        case Storage::F16: return GGML_TYPE_F16;
        case Storage::BF16: return GGML_TYPE_BF16;
        case Storage::Q8_0: return GGML_TYPE_Q8_0;
        case Storage::Q4_0: return GGML_TYPE_Q4_0;
        case Storage::Q4_1: return GGML_TYPE_Q4_1;
        case Storage::Q5_0: return GGML_TYPE_Q5_0;
        case Storage::Q5_1: return GGML_TYPE_Q5_1;
        case Storage::Q2_K: return GGML_TYPE_Q2_K;
        case Storage::Q3_K: return GGML_TYPE_Q3_K;
        case Storage::Q4_K: return GGML_TYPE_Q4_K;
        case Storage::Q5_K: return GGML_TYPE_Q5_K;
        case Storage::Q6_K: return GGML_TYPE_Q6_K;
        case Storage::IQ4_NL: return GGML_TYPE_IQ4_NL;
        case Storage::IQ4_XS: return GGML_TYPE_IQ4_XS;
        case Storage::IQ2_XXS: return GGML_TYPE_IQ2_XXS;
        case Storage::IQ2_XS: return GGML_TYPE_IQ2_XS;
        case Storage::IQ2_S: return GGML_TYPE_IQ2_S;
        case Storage::IQ3_XXS: return GGML_TYPE_IQ3_XXS;
        case Storage::IQ3_S: return GGML_TYPE_IQ3_S;
        case Storage::IQ1_S: return GGML_TYPE_IQ1_S;
        case Storage::IQ1_M: return GGML_TYPE_IQ1_M;
        case Storage::TQ1_0: return GGML_TYPE_TQ1_0;
        case Storage::TQ2_0: return GGML_TYPE_TQ2_0;
        case Storage::MXFP4: return GGML_TYPE_MXFP4;
    }
    return GGML_TYPE_F32;
}

}  // namespace dg

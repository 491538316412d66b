// One check per precondition of backend/gg.h: each call that breaks one is a
// gg::Violation (never a GGML_ASSERT), each that keeps them all succeeds, and a
// full context is gg::OutOfRoom. Built and run by tests/test_gg_preconditions.py.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "gg.h"

using namespace dg;

static int failures = 0, checks = 0;

static void expect_violation(const char* what, const std::function<void()>& f) {
    ++checks;
    try {
        f();
    } catch (const gg::Violation&) {
        return;
    } catch (const std::exception& e) {
        std::printf("FAIL %s: %s instead of a Violation\n", what, e.what());
        ++failures;
        return;
    }
    std::printf("FAIL %s: accepted\n", what);
    ++failures;
}

static void expect_ok(const char* what, const std::function<void()>& f) {
    ++checks;
    try {
        f();
    } catch (const std::exception& e) {
        std::printf("FAIL %s: %s\n", what, e.what());
        ++failures;
    }
}

int main() {
    ggml_init_params ip{size_t(64) << 20, nullptr, true};
    ggml_context* ctx = ggml_init(ip);
    auto T = [&](ggml_type t, int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
        const int64_t ne[4] = {a, b, c, d};
        return gg::new_tensor(ctx, t, ne);
    };
    const ggml_type F32 = GGML_TYPE_F32, F16 = GGML_TYPE_F16, I32 = GGML_TYPE_I32, Q8 = GGML_TYPE_Q8_0;

    // new_tensor
    expect_violation("new_tensor: a size of 0", [&] { T(F32, 0); });
    expect_violation("new_tensor: a negative size", [&] { T(F32, 4, -1); });
    expect_violation("new_tensor: rows not of whole blocks", [&] { T(Q8, 33); });
    expect_violation("new_tensor: the byte size overflows", [&] { T(F32, int64_t(1) << 40, int64_t(1) << 40); });
    expect_ok("new_tensor", [&] { T(Q8, 64, 3); });

    // add / sub / mul / div
    for (auto op : {gg::add, gg::sub, gg::mul, gg::div}) {
        expect_violation("binary: b does not repeat to a", [&] { op(ctx, T(F32, 4, 3), T(F32, 3)); });
        expect_violation("binary: b larger than a", [&] { op(ctx, T(F32, 4), T(F32, 4, 2)); });
        expect_violation("binary: I32 operands", [&] { op(ctx, T(I32, 4), T(I32, 4)); });
        expect_violation("binary: F32 a with F16 b", [&] { op(ctx, T(F32, 4), T(F16, 4)); });
        expect_violation("binary: a not dense along ne0", [&] {
            op(ctx, gg::transpose(ctx, T(F32, 4, 4)), T(F32, 4, 4));
        });
        expect_ok("binary", [&] { op(ctx, T(F32, 4, 3), T(F32, 4)); });
        expect_ok("binary: f16 with f32", [&] { op(ctx, T(F16, 4, 3), T(F32, 4, 3)); });
    }

    // mul_mat
    expect_violation("mul_mat: different K", [&] { gg::mul_mat(ctx, T(F32, 4, 2), T(F32, 5, 3)); });
    expect_violation("mul_mat: a's batch does not divide b's", [&] { gg::mul_mat(ctx, T(F32, 4, 2, 2), T(F32, 4, 3, 3)); });
    expect_violation("mul_mat: a transposed", [&] { gg::mul_mat(ctx, gg::transpose(ctx, T(F32, 4, 4)), T(F32, 4, 3)); });
    expect_violation("mul_mat: I32 a", [&] { gg::mul_mat(ctx, T(I32, 4, 2), T(F32, 4, 3)); });
    expect_violation("mul_mat: F16 b", [&] { gg::mul_mat(ctx, T(F32, 4, 2), T(F16, 4, 3)); });
    expect_ok("mul_mat", [&] { gg::mul_mat(ctx, T(Q8, 64, 2), T(F32, 64, 3, 2)); });

    // mul_mat_id: 4 experts of [K=8, N=5]; b [8, 1 or 2, T=3]; ids [2, 3]
    expect_violation("mul_mat_id: as transposed", [&] {
        gg::mul_mat_id(ctx, gg::transpose(ctx, T(F32, 8, 8, 4)), T(F32, 8, 1, 3), T(I32, 2, 3));
    });
    expect_violation("mul_mat_id: I32 as", [&] { gg::mul_mat_id(ctx, T(I32, 8, 5, 4), T(F32, 8, 1, 3), T(I32, 2, 3)); });
    expect_violation("mul_mat_id: F16 b", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F16, 8, 1, 3), T(I32, 2, 3)); });
    expect_violation("mul_mat_id: F32 ids", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 1, 3), T(F32, 2, 3)); });
    expect_violation("mul_mat_id: b not dense along ne0", [&] {
        gg::mul_mat_id(ctx, T(F32, 8, 5, 4), gg::permute(ctx, T(F32, 2, 8, 3), 1, 0, 2, 3), T(I32, 2, 3));
    });
    expect_violation("mul_mat_id: as 4-D", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4, 2), T(F32, 8, 1, 3), T(I32, 2, 3)); });
    expect_violation("mul_mat_id: b 4-D", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 1, 3, 2), T(I32, 2, 3)); });
    expect_violation("mul_mat_id: ids 3-D", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 1, 3), T(I32, 2, 3, 2)); });
    expect_violation("mul_mat_id: different K", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 7, 1, 3), T(I32, 2, 3)); });
    expect_violation("mul_mat_id: ids per b row", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 1, 3), T(I32, 2, 4)); });
    expect_violation("mul_mat_id: b rows do not broadcast", [&] {
        gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 2, 3), T(I32, 3, 3));
    });
    expect_ok("mul_mat_id", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 1, 3), T(I32, 2, 3)); });
    expect_ok("mul_mat_id: a row per expert", [&] { gg::mul_mat_id(ctx, T(F32, 8, 5, 4), T(F32, 8, 2, 3), T(I32, 2, 3)); });
    expect_ok("mul_mat_id: q8_0 experts", [&] { gg::mul_mat_id(ctx, T(Q8, 64, 5, 4), T(F32, 64, 1, 3), T(I32, 2, 3)); });

    // cast / cont / dup / cpy
    expect_violation("cast: f16 to i32", [&] { gg::cast(ctx, T(F16, 4), I32); });
    expect_violation("cast: i32 to f16", [&] { gg::cast(ctx, T(I32, 4), F16); });
    expect_violation("cast: rows not of whole blocks", [&] { gg::cast(ctx, T(F32, 33), Q8); });
    expect_ok("cast", [&] { gg::cast(ctx, gg::cast(ctx, T(I32, 4), F32), F16); });
    expect_violation("cont: quantized", [&] { gg::cont(ctx, T(Q8, 32)); });
    expect_violation("dup: quantized", [&] { gg::dup(ctx, T(Q8, 32)); });
    expect_violation("cpy: different counts", [&] { gg::cpy(ctx, T(F32, 4), T(F32, 5)); });
    expect_violation("cpy: f16 into i32", [&] { gg::cpy(ctx, T(F16, 4), T(I32, 4)); });
    expect_ok("cpy", [&] { gg::cpy(ctx, T(F32, 4, 2), T(F16, 8)); });

    // repeat_4d
    expect_violation("repeat_4d: not a multiple", [&] { gg::repeat_4d(ctx, T(F32, 3), 4, 1, 1, 1); });
    expect_violation("repeat_4d: size 0", [&] { gg::repeat_4d(ctx, T(F32, 3), 0, 1, 1, 1); });
    expect_violation("repeat_4d: quantized", [&] { gg::repeat_4d(ctx, T(Q8, 32), 64, 1, 1, 1); });
    expect_ok("repeat_4d", [&] { gg::repeat_4d(ctx, T(I32, 3), 6, 2, 1, 1); });

    // reshape
    expect_violation("reshape: not contiguous", [&] { gg::reshape_2d(ctx, gg::transpose(ctx, T(F32, 4, 2)), 2, 4); });
    expect_violation("reshape_1d: count differs", [&] { gg::reshape_1d(ctx, T(F32, 4, 2), 7); });
    expect_violation("reshape_2d: count differs", [&] { gg::reshape_2d(ctx, T(F32, 4, 2), 3, 3); });
    expect_violation("reshape_3d: count differs", [&] { gg::reshape_3d(ctx, T(F32, 4, 2), 2, 2, 3); });
    expect_violation("reshape_4d: count differs", [&] { gg::reshape_4d(ctx, T(F32, 4, 2), 2, 2, 2, 2); });
    expect_violation("reshape_4d: overflowing sizes", [&] {
        gg::reshape_4d(ctx, T(F32, 4, 2), int64_t(1) << 62, 4, 1, 1);
    });
    expect_ok("reshape_4d", [&] { gg::reshape_4d(ctx, T(F32, 4, 2), 2, 2, 2, 1); });

    // view_4d
    {
        ggml_tensor* a = T(F32, 8, 4);  // 128 bytes
        expect_violation("view_4d: past the end (dense)", [&] { gg::view_4d(ctx, a, 8, 4, 1, 1, 32, 128, 128, 4); });
        expect_violation("view_4d: past the end (strided)", [&] { gg::view_4d(ctx, a, 2, 2, 1, 1, 124, 248, 248, 0); });
        expect_violation("view_4d: size 0", [&] { gg::view_4d(ctx, a, 0, 1, 1, 1, 32, 32, 32, 0); });
        expect_violation("view_4d: overflowing offset", [&] { gg::view_4d(ctx, a, 1, 1, 1, 1, 4, 4, 4, SIZE_MAX - 2); });
        ggml_tensor* v = gg::view_4d(ctx, a, 4, 2, 1, 1, 64, 128, 128, 16);
        expect_violation("view_4d: a view of a view past its root", [&] { gg::view_4d(ctx, v, 8, 1, 1, 1, 32, 32, 32, 100); });
        expect_ok("view_4d", [&] { gg::view_4d(ctx, a, 4, 2, 1, 1, 32, 64, 64, 64); });
    }

    // permute / concat
    expect_violation("permute: repeated axis", [&] { gg::permute(ctx, T(F32, 4), 0, 0, 1, 2); });
    expect_violation("permute: axis out of range", [&] { gg::permute(ctx, T(F32, 4), 0, 1, 2, 4); });
    expect_ok("permute", [&] { gg::permute(ctx, T(F32, 4, 2), 1, 0, 2, 3); });
    expect_violation("concat: dim out of range", [&] { gg::concat(ctx, T(F32, 4), T(F32, 4), 4); });
    expect_violation("concat: different types", [&] { gg::concat(ctx, T(F32, 4), T(I32, 4), 0); });
    expect_violation("concat: sizes differ off the axis", [&] { gg::concat(ctx, T(F32, 4, 2), T(F32, 4, 3), 0); });
    expect_violation("concat: quantized", [&] { gg::concat(ctx, T(Q8, 32), T(Q8, 32), 1); });
    expect_violation("concat: rows not contiguous", [&] {
        gg::concat(ctx, gg::transpose(ctx, T(F32, 4, 4)), T(F32, 4, 4), 1);
    });
    expect_ok("concat", [&] { gg::concat(ctx, T(I32, 4, 2), T(I32, 4, 3), 1); });

    // soft_max
    expect_violation("soft_max: F16 input", [&] { gg::soft_max(ctx, T(F16, 4)); });
    expect_violation("soft_max: not contiguous", [&] { gg::soft_max(ctx, gg::transpose(ctx, T(F32, 4, 4))); });
    expect_violation("soft_max_ext: I32 mask", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2), T(I32, 4, 2), 1.0f, 0.0f); });
    expect_violation("soft_max_ext: mask ne0", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2), T(F32, 3, 2), 1.0f, 0.0f); });
    expect_violation("soft_max_ext: mask too few rows", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2), T(F32, 4, 1), 1.0f, 0.0f); });
    expect_violation("soft_max_ext: mask heads", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2, 3), T(F32, 4, 2, 2), 1.0f, 0.0f); });
    expect_violation("soft_max_ext: max_bias", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2), T(F32, 4, 2), 1.0f, 1.0f); });
    expect_violation("soft_max_ext: NaN scale", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2), nullptr, NAN, 0.0f); });
    expect_ok("soft_max_ext", [&] { gg::soft_max_ext(ctx, T(F32, 4, 2, 4), T(F16, 4, 3, 2), 0.5f, 0.0f); });

    // norm / rms_norm
    for (auto op : {gg::norm, gg::rms_norm}) {
        expect_violation("norm: negative eps", [&] { op(ctx, T(F32, 4), -1e-5f); });
        expect_violation("norm: NaN eps", [&] { op(ctx, T(F32, 4), NAN); });
        expect_violation("norm: infinite eps", [&] { op(ctx, T(F32, 4), INFINITY); });
        expect_violation("norm: F16 input", [&] { op(ctx, T(F16, 4), 1e-5f); });
        expect_violation("norm: not dense", [&] { op(ctx, gg::transpose(ctx, T(F32, 4, 4)), 1e-5f); });
        expect_ok("norm", [&] { op(ctx, T(F32, 4, 3), 0.0f); });
    }

    // group_norm
    expect_violation("group_norm: F16", [&] { gg::group_norm(ctx, T(F16, 4, 4, 6), 2, 1e-5f); });
    expect_violation("group_norm: not dense", [&] { gg::group_norm(ctx, gg::transpose(ctx, T(F32, 4, 4, 6)), 2, 1e-5f); });
    expect_violation("group_norm: 0 groups", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6), 0, 1e-5f); });
    expect_violation("group_norm: more groups than channels", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6), 7, 1e-5f); });
    expect_violation("group_norm: groups do not divide", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6), 4, 1e-5f); });
    expect_violation("group_norm: negative eps", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6), 2, -1.0f); });
    expect_violation("group_norm: NaN eps", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6), 2, NAN); });
    expect_ok("group_norm", [&] { gg::group_norm(ctx, T(F32, 4, 4, 6, 2), 3, 1e-5f); });

    // interpolate
    const uint32_t BIL = GGML_SCALE_MODE_BILINEAR, AC = GGML_SCALE_FLAG_ALIGN_CORNERS;
    expect_violation("interpolate: F16", [&] { gg::interpolate(ctx, T(F16, 4, 4, 2), 8, 8, 2, 1, BIL); });
    expect_violation("interpolate: size 0", [&] { gg::interpolate(ctx, T(F32, 4, 4, 2), 0, 8, 2, 1, BIL); });
    expect_violation("interpolate: unknown mode", [&] { gg::interpolate(ctx, T(F32, 4, 4, 2), 8, 8, 2, 1, GGML_SCALE_MODE_COUNT); });
    expect_violation("interpolate: antialias", [&] {
        gg::interpolate(ctx, T(F32, 4, 4, 2), 8, 8, 2, 1, BIL | GGML_SCALE_FLAG_ANTIALIAS);
    });
    expect_violation("interpolate: align corners with nearest", [&] {
        gg::interpolate(ctx, T(F32, 4, 4, 2), 8, 8, 2, 1, GGML_SCALE_MODE_NEAREST | AC);
    });
    expect_violation("interpolate: ne2 changed", [&] { gg::interpolate(ctx, T(F32, 4, 4, 2), 8, 8, 4, 1, BIL); });
    expect_violation("interpolate: ne3 changed", [&] { gg::interpolate(ctx, T(F32, 4, 4, 2), 8, 8, 2, 2, BIL); });
    expect_ok("interpolate", [&] { gg::interpolate(ctx, T(F32, 4, 4, 2, 3), 7, 3, 2, 3, BIL | AC); });
    expect_ok("interpolate: bicubic", [&] {
        gg::interpolate(ctx, T(F32, 4, 4, 2, 3), 7, 3, 2, 3, GGML_SCALE_MODE_BICUBIC | AC);
    });

    // get_rows / set_rows
    expect_violation("get_rows: F32 indices", [&] { gg::get_rows(ctx, T(F32, 4, 10), T(F32, 3)); });
    expect_violation("get_rows: batch mismatch", [&] { gg::get_rows(ctx, T(F32, 4, 10, 2), T(I32, 3, 3)); });
    expect_violation("get_rows: indices ne3", [&] { gg::get_rows(ctx, T(F32, 4, 10), T(I32, 3, 1, 1, 2)); });
    expect_ok("get_rows", [&] { gg::get_rows(ctx, T(Q8, 32, 10), T(I32, 3)); });
    expect_violation("set_rows: I32 destination", [&] { gg::set_rows(ctx, T(I32, 4, 10), T(F32, 4, 2), T(I32, 2)); });
    expect_violation("set_rows: I32 rows", [&] { gg::set_rows(ctx, T(F32, 4, 10), T(I32, 4, 2), T(I32, 2)); });
    expect_violation("set_rows: F32 indices", [&] { gg::set_rows(ctx, T(F32, 4, 10), T(F32, 4, 2), T(F32, 2)); });
    expect_violation("set_rows: width", [&] { gg::set_rows(ctx, T(F32, 4, 10), T(F32, 5, 2), T(I32, 2)); });
    expect_violation("set_rows: count", [&] { gg::set_rows(ctx, T(F32, 4, 10), T(F32, 4, 2), T(I32, 3)); });
    expect_violation("set_rows: batch", [&] { gg::set_rows(ctx, T(F32, 4, 10, 2), T(F32, 4, 2, 3), T(I32, 2)); });
    expect_violation("set_rows: indices ne3", [&] { gg::set_rows(ctx, T(F32, 4, 10), T(F32, 4, 2), T(I32, 2, 1, 1, 2)); });
    expect_ok("set_rows", [&] { gg::set_rows(ctx, T(F32, 4, 10, 2), T(F32, 4, 2, 2), T(I32, 2)); });

    // rope_ext
    expect_violation("rope: I32 x", [&] { gg::rope_ext(ctx, T(I32, 8, 2, 3), T(I32, 3), nullptr, 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: I64-like positions (F32)", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(F32, 3), nullptr, 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: position count", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 4), nullptr, 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: odd n_dims", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 7, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: n_dims above ne0", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 10, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: odd rows", [&] { gg::rope_ext(ctx, T(F32, 7, 2, 3), T(I32, 3), nullptr, 4, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: mode bit 0", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 8, 1, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: base 0", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 8, 0, 0.0f, 1.0f, 1.0f); });
    expect_violation("rope: NaN scale", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 8, 0, 1e4f, NAN, 1.0f); });
    expect_violation("rope: infinite attn_factor", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 8, 0, 1e4f, 1.0f, INFINITY); });
    expect_violation("rope: F16 factors", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), T(F16, 4), 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: too few factors", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), T(F32, 3), 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_violation("rope: factors for the rotated pairs only", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), T(F32, 2), 4, 2, 1.0f, 1.0f, 1.0f); });
    expect_violation("rope: factors a matrix", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), T(F32, 4, 2), 8, 0, 1e4f, 1.0f, 1.0f); });
    expect_ok("rope with factors", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), T(F32, 4), 8, 2, 1.0f, 1.0f, 0.5f); });
    expect_ok("rope", [&] { gg::rope_ext(ctx, T(F32, 8, 2, 3), T(I32, 3), nullptr, 4, 2, 1e4f, 1.0f, 1.0f); });

    // flash_attn_ext: q [D, Sq, Hq, B], k/v [D, Skv, Hkv, B]
    expect_violation("flash: F16 q", [&] { gg::flash_attn_ext(ctx, T(F16, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), nullptr, 1.0f); });
    expect_violation("flash: head size", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 6, 5, 2), T(F32, 8, 5, 2), nullptr, 1.0f); });
    expect_violation("flash: heads", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 3), T(F32, 8, 5, 3), nullptr, 1.0f); });
    expect_violation("flash: v length", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 4, 2), nullptr, 1.0f); });
    expect_violation("flash: batch", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4, 2), T(F32, 8, 5, 2), T(F32, 8, 5, 2), nullptr, 1.0f); });
    expect_violation("flash: F32 mask", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), T(F32, 5, 2), 1.0f); });
    expect_violation("flash: mask length", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), T(F16, 4, 2), 1.0f); });
    expect_violation("flash: mask rows", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), T(F16, 5, 1), 1.0f); });
    expect_violation("flash: mask heads", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), T(F16, 5, 2, 3), 1.0f); });
    expect_violation("flash: NaN scale", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), nullptr, NAN); });
    expect_ok("flash", [&] { gg::flash_attn_ext(ctx, T(F32, 8, 2, 4), T(F32, 8, 5, 2), T(F32, 8, 5, 2), T(F16, 5, 2, 2), 0.3f); });

    // arange / fill / diag_mask_inf
    expect_violation("arange: stop <= start", [&] { gg::arange(ctx, 3.0f, 3.0f, 1.0f); });
    expect_violation("arange: step 0", [&] { gg::arange(ctx, 0.0f, 3.0f, 0.0f); });
    expect_ok("arange", [&] { gg::arange(ctx, 0.0f, 3.0f, 1.0f); });
    expect_violation("fill: I32", [&] { gg::fill(ctx, T(I32, 4), 0.0f); });
    expect_violation("fill: not contiguous", [&] { gg::fill(ctx, gg::transpose(ctx, T(F32, 4, 4)), 0.0f); });
    expect_violation("diag_mask_inf: F16", [&] { gg::diag_mask_inf_inplace(ctx, T(F16, 4, 4), 0); });

    // reductions, unary
    expect_violation("sum_rows: I32", [&] { gg::sum_rows(ctx, T(I32, 4)); });
    expect_violation("mean: F16", [&] { gg::mean(ctx, T(F16, 4)); });
    expect_violation("unary: I32", [&] { gg::unary(ctx, gg::Unary::Exp, T(I32, 4)); });
    expect_violation("unary: BF16", [&] { gg::unary(ctx, gg::Unary::Exp, T(GGML_TYPE_BF16, 4)); });
    expect_violation("unary: rows not contiguous", [&] { gg::unary(ctx, gg::Unary::Exp, gg::transpose(ctx, T(F32, 4, 4))); });
    expect_ok("unary", [&] { gg::unary(ctx, gg::Unary::Silu, T(F16, 4)); });

    expect_ok("unary: gelu_erf", [&] { gg::unary(ctx, gg::Unary::GeluErf, T(F32, 4)); });

    // im2col, pool_2d, argsort (the portable lowerings of convolution, pooling, TopK)
    ggml_tensor* kern = T(F32, 3, 3, 2, 4);
    expect_violation("im2col: F16 input", [&] { gg::im2col(ctx, kern, T(F16, 8, 8, 2), 1, 1, 0, 0, 1, 1); });
    expect_violation("im2col: I32 kernel", [&] { gg::im2col(ctx, T(I32, 3, 3, 2), T(F32, 8, 8, 2), 1, 1, 0, 0, 1, 1); });
    expect_violation("im2col: input not contiguous", [&] {
        gg::im2col(ctx, T(F32, 3, 3, 1), gg::transpose(ctx, T(F32, 8, 8)), 1, 1, 0, 0, 1, 1);
    });
    expect_violation("im2col: channels differ", [&] { gg::im2col(ctx, kern, T(F32, 8, 8, 3), 1, 1, 0, 0, 1, 1); });
    expect_violation("im2col: stride 0", [&] { gg::im2col(ctx, kern, T(F32, 8, 8, 2), 0, 1, 0, 0, 1, 1); });
    expect_violation("im2col: dilation 0", [&] { gg::im2col(ctx, kern, T(F32, 8, 8, 2), 1, 1, 0, 0, 1, 0); });
    expect_violation("im2col: negative padding", [&] { gg::im2col(ctx, kern, T(F32, 8, 8, 2), 1, 1, -1, 0, 1, 1); });
    expect_violation("im2col: kernel above the input", [&] { gg::im2col(ctx, kern, T(F32, 2, 8, 2), 1, 1, 0, 0, 1, 1); });
    expect_violation("im2col: dilated kernel above the input", [&] { gg::im2col(ctx, kern, T(F32, 8, 4, 2), 1, 1, 0, 0, 1, 2); });
    expect_ok("im2col", [&] { gg::im2col(ctx, kern, T(F32, 2, 8, 2, 3), 2, 1, 1, 1, 1, 3); });
    expect_violation("pool_2d: count op", [&] { gg::pool_2d(ctx, T(F32, 8, 8), GGML_OP_POOL_COUNT, 2, 2, 2, 2, 0, 0); });
    expect_violation("pool_2d: F16", [&] { gg::pool_2d(ctx, T(F16, 8, 8), GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0); });
    expect_violation("pool_2d: not contiguous", [&] {
        gg::pool_2d(ctx, gg::transpose(ctx, T(F32, 8, 8)), GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
    });
    expect_violation("pool_2d: padding of the kernel", [&] { gg::pool_2d(ctx, T(F32, 8, 8), GGML_OP_POOL_MAX, 2, 2, 2, 2, 2, 0); });
    expect_violation("pool_2d: negative padding", [&] { gg::pool_2d(ctx, T(F32, 8, 8), GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, -1); });
    expect_violation("pool_2d: stride 0", [&] { gg::pool_2d(ctx, T(F32, 8, 8), GGML_OP_POOL_AVG, 2, 2, 0, 2, 0, 0); });
    expect_violation("pool_2d: kernel above the input", [&] { gg::pool_2d(ctx, T(F32, 8, 1), GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0); });
    expect_ok("pool_2d", [&] { gg::pool_2d(ctx, T(F32, 8, 1, 3), GGML_OP_POOL_AVG, 3, 1, 2, 1, 1, 0); });
    expect_violation("argsort: I32", [&] { gg::argsort(ctx, T(I32, 8, 2), true); });
    expect_violation("argsort: not contiguous", [&] { gg::argsort(ctx, gg::transpose(ctx, T(F32, 8, 8)), false); });
    expect_ok("argsort", [&] { gg::argsort(ctx, T(F32, 8, 2), true); });

    // custom ops
    ggml_tensor* args[GGML_MAX_SRC] = {};
    for (auto& a : args) a = T(F32, 4);
    auto noop = [](ggml_tensor*, int, int, void*) {};
    expect_violation("custom_4d: too many args", [&] { gg::custom_4d(ctx, F32, 4, 1, 1, 1, args, GGML_MAX_SRC, noop, 1, nullptr); });
    expect_violation("custom_4d: size 0", [&] { gg::custom_4d(ctx, F32, 4, 0, 1, 1, args, 1, noop, 1, nullptr); });
    expect_violation("custom_inplace: too many args", [&] {
        gg::custom_inplace(ctx, T(F32, 4), args, GGML_MAX_SRC - 1, noop, 1, nullptr);
    });
    expect_ok("custom_4d", [&] { gg::custom_4d(ctx, F32, 4, 1, 1, 1, args, GGML_MAX_SRC - 1, noop, 1, nullptr); });

    // a full context: OutOfRoom, never ggml's abort
    {
        ggml_init_params small{ggml_tensor_overhead() * 3, nullptr, true};
        ggml_context* tiny = ggml_init(small);
        ++checks;
        int made = 0;
        try {
            for (; made < 10; ++made) {
                const int64_t ne[4] = {4, 1, 1, 1};
                gg::new_tensor(tiny, F32, ne);
            }
            std::printf("FAIL a full context: 10 tensors fit in room for 3\n");
            ++failures;
        } catch (const gg::OutOfRoom&) {
            if (made < 1 || made > 3) {
                std::printf("FAIL a full context: OutOfRoom after %d tensors\n", made);
                ++failures;
            }
        }
        ggml_free(tiny);
    }

    ggml_free(ctx);
    std::printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}

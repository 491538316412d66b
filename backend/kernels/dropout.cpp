#include "dropout.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "../gg.h"
#include "thread_share.h"

namespace dg::kernels {

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; ++r) {
        const uint64_t p0 = uint64_t(0xD2511F53u) * c0;
        const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
        const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
        c1 = uint32_t(p1);
        c3 = uint32_t(p0);
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;  // the Weyl sequence of the key
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void dropout_block(uint64_t seed, uint64_t offset, uint64_t b, uint32_t out[4]) {
    uint32_t words[4];
    if (offset != 0) {
        const uint32_t ctr[4] = {uint32_t(offset), uint32_t(offset >> 32), uint32_t(b), uint32_t(b >> 32)};
        const uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
        philox4x32_10(ctr, key, out);
        return;
    }
    // offset 0: the 32-bit path (seed and index truncated), one draw for the block's 4 elements
    const uint32_t b32 = uint32_t(b), s = uint32_t(seed);
    const uint32_t ctr[4] = {b32, b32 + 1u, b32, b32 + 3u};
    const uint32_t key[2] = {s, s};
    philox4x32_10(ctr, key, words);
    out[0] = out[1] = out[2] = out[3] = words[2];
}

namespace {

struct Params {
    uint64_t seed, offset;
    float p;
};

int64_t read_int(const ggml_tensor* t) {
    int32_t v;
    std::memcpy(&v, t->data, sizeof v);
    return v;
}

Params read_params(const ggml_tensor* dst) {
    Params r;
    r.seed = uint64_t(read_int(dst->src[1]));
    r.offset = uint64_t(read_int(dst->src[2]));
    std::memcpy(&r.p, dst->src[3]->data, sizeof r.p);
    if (!(r.p >= 0.0f && r.p <= 1.0f))
        throw std::domain_error("Dropout probability " + std::to_string(r.p) + " is outside [0, 1]");
    return r;
}

inline float load(const ggml_tensor* t, int64_t i) {
    switch (t->type) {
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(static_cast<const ggml_fp16_t*>(t->data)[i]);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(static_cast<const ggml_bf16_t*>(t->data)[i]);
        default: return static_cast<const float*>(t->data)[i];
    }
}

inline void store(ggml_tensor* t, int64_t i, float v) {
    switch (t->type) {
        case GGML_TYPE_F16: static_cast<ggml_fp16_t*>(t->data)[i] = ggml_fp32_to_fp16(v); break;
        case GGML_TYPE_BF16: static_cast<ggml_bf16_t*>(t->data)[i] = ggml_fp32_to_bf16(v); break;
        default: static_cast<float*>(t->data)[i] = v; break;
    }
}

// Each thread takes whole blocks of 4 elements; `f(i, keep)` per element.
template <class F>
void for_each_draw(const ggml_tensor* dst, const Params& q, int ith, int nth, F&& f) {
    const int64_t n = ggml_nelements(dst);
    const double threshold = double(q.p) * 4294967295.0;  // a draw above p * (2^32 - 1) is kept
    const auto [lo, hi] = thread_share((n + 3) / 4, ith, nth);
    uint32_t d[4];
    for (int64_t blk = lo; blk < hi; ++blk) {
        const int64_t b = blk * 4;
        dropout_block(q.seed, q.offset, uint64_t(b), d);
        const int64_t end = b + 4 < n ? b + 4 : n;
        for (int64_t i = b; i < end; ++i) f(i, double(d[i - b]) > threshold);
    }
}

void dst_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const Params q = read_params(dst);
    const float scale = q.p == 1.0f ? 0.0f : 1.0f / (1.0f - q.p);
    const ggml_tensor* src = dst->src[0];
    for_each_draw(dst, q, ith, nth, [&](int64_t i, bool keep) { store(dst, i, keep ? load(src, i) * scale : 0.0f); });
}

void mask_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const Params q = read_params(dst);
    int8_t* out = static_cast<int8_t*>(dst->data);
    for_each_draw(dst, q, ith, nth, [&](int64_t i, bool keep) { out[i] = keep ? 1 : 0; });
}

}  // namespace

ggml_tensor* dropout_dst(ggml_context* ctx, ggml_tensor* src, ggml_tensor* seed, ggml_tensor* offset,
                         ggml_tensor* probability) {
    ggml_tensor* args[4] = {src, seed, offset, probability};
    return gg::custom_4d(ctx, src->type, src->ne[0], src->ne[1], src->ne[2], src->ne[3], args, 4, dst_kernel,
                          GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* dropout_mask(ggml_context* ctx, ggml_tensor* src, ggml_tensor* seed, ggml_tensor* offset,
                          ggml_tensor* probability) {
    ggml_tensor* args[4] = {src, seed, offset, probability};
    return gg::custom_4d(ctx, GGML_TYPE_I8, src->ne[0], src->ne[1], src->ne[2], src->ne[3], args, 4, mask_kernel,
                          GGML_N_TASKS_MAX, nullptr);
}

}  // namespace dg::kernels

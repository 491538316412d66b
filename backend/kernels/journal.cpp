#include "journal.h"

#include <cstring>

#include "../gg.h"

namespace dg::kernels {

void Journal::save(void* p, size_t n) {
    ranges_.push_back({p, bytes_.size(), n});
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
}

void Journal::roll_back() {
    for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) std::memcpy(it->dst, bytes_.data() + it->offset, it->size);
    clear();
}

namespace {

// One thread (n_tasks 1): the journal is appended in a fixed order, and the
// rows written are few (a decode step writes one per layer).
void set_rows_kernel(ggml_tensor* out, int ith, int, void* ud) {
    if (ith != 0) return;
    auto* journal = static_cast<Journal*>(ud);
    ggml_tensor* dst = out->src[0];
    const ggml_tensor* src = out->src[1];
    const ggml_tensor* idx = out->src[2];
    const int64_t width = dst->ne[0], n = idx->ne[0];
    const size_t row_bytes = ggml_row_size(dst->type, width);
    const auto* ids = static_cast<const int32_t*>(idx->data);
    for (int64_t i3 = 0; i3 < dst->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < dst->ne[2]; ++i2)
            for (int64_t i = 0; i < n; ++i) {
                char* d = static_cast<char*>(dst->data) + size_t(ids[i]) * dst->nb[1] + size_t(i2) * dst->nb[2] +
                          size_t(i3) * dst->nb[3];
                const float* s = reinterpret_cast<const float*>(static_cast<const char*>(src->data) + size_t(i) * src->nb[1] +
                                                                size_t(i2) * src->nb[2] + size_t(i3) * src->nb[3]);
                journal->save(d, row_bytes);
                if (dst->type == GGML_TYPE_F32) std::memcpy(d, s, row_bytes);
                else if (dst->type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(s, reinterpret_cast<ggml_fp16_t*>(d), width);
                else ggml_fp32_to_bf16_row(s, reinterpret_cast<ggml_bf16_t*>(d), width);
            }
}

void copy_kernel(ggml_tensor* out, int ith, int, void* ud) {
    if (ith != 0) return;
    auto* journal = static_cast<Journal*>(ud);
    ggml_tensor* view = out->src[0];
    const ggml_tensor* src = out->src[1];
    const size_t row_bytes = ggml_row_size(view->type, view->ne[0]);
    const char* s = static_cast<const char*>(src->data);
    for (int64_t i3 = 0; i3 < view->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < view->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < view->ne[1]; ++i1) {
                char* d = static_cast<char*>(view->data) + size_t(i1) * view->nb[1] + size_t(i2) * view->nb[2] +
                          size_t(i3) * view->nb[3];
                journal->save(d, row_bytes);
                std::memcpy(d, s, row_bytes);
                s += row_bytes;
            }
}

}  // namespace

ggml_tensor* journaled_set_rows(ggml_context* ctx, ggml_tensor* dst, ggml_tensor* src, ggml_tensor* idx, Journal* journal) {
    const char* fn = "journaled_set_rows";
    if (dst->type != GGML_TYPE_F32 && dst->type != GGML_TYPE_F16 && dst->type != GGML_TYPE_BF16)
        fail<gg::Violation>(fn, ": the destination must be F32, F16 or BF16, got ", gg::describe(dst));
    if (src->type != GGML_TYPE_F32 || idx->type != GGML_TYPE_I32)
        fail<gg::Violation>(fn, ": rows must be F32 and indices I32, got ", gg::describe(src), ", ", gg::describe(idx));
    if (src->ne[0] != dst->ne[0] || src->ne[1] != idx->ne[0] || src->ne[2] != dst->ne[2] || src->ne[3] != dst->ne[3] ||
        idx->ne[1] != 1 || idx->ne[2] != 1 || idx->ne[3] != 1 || dst->nb[0] != ggml_type_size(dst->type) ||
        src->nb[0] != sizeof(float) || idx->nb[0] != sizeof(int32_t))
        fail<gg::Violation>(fn, ": rows ", gg::describe(src), " and indices ", gg::describe(idx), " do not fit ",
                            gg::describe(dst));
    ggml_tensor* args[2] = {src, idx};
    return gg::custom_inplace(ctx, dst, args, 2, set_rows_kernel, 1, journal);
}

ggml_tensor* journaled_copy(ggml_context* ctx, ggml_tensor* src, ggml_tensor* view, Journal* journal) {
    const char* fn = "journaled_copy";
    if (src->type != view->type || !ggml_is_contiguous(src) || view->nb[0] != ggml_type_size(view->type) ||
        ggml_is_quantized(view->type))
        fail<gg::Violation>(fn, ": ", gg::describe(src), " cannot be copied into ", gg::describe(view));
    for (int d = 0; d < 4; ++d)
        if (src->ne[d] != view->ne[d]) fail<gg::Violation>(fn, ": ", gg::describe(src), " and ", gg::describe(view), " differ");
    ggml_tensor* args[1] = {src};
    return gg::custom_inplace(ctx, view, args, 1, copy_kernel, 1, journal);
}

}  // namespace dg::kernels

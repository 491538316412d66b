// Ops that create tensors from their attributes: Arange, GenIndex, Full; and
// Dropout, which creates its mask from a seed (kernels/dropout.h).
// Sizes come from the IR's output shape (evaluated for this binding), never
// from a trace-time number.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "../errors.h"
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/dropout.h"
#include "../kernels/index_kernels.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

bool fits_i32(int64_t v) { return v >= kI32Min && v <= kI32Max; }

void lower_arange(LowerCtx& c) {
    const Dims o = c.out_shape(0);
    const ggml_type type = ggml_type_of(c.out_dtype(0));
    if (o.rank != 1) c.unsupported("the output must be 1-D");
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_I32) c.unsupported(cat("output dtype ", dtype_name(c.out_dtype(0))));
    const auto& a = c.attrs<ops::ArangeAttrs>();
    const int64_t start = c.eval(a.start), end = c.eval(a.end), step = a.step;
    if (step == 0) c.unsupported("step is 0");
    const int64_t n = o.d[0];
    // the IR's length must be ceil((end - start) / step) for this binding
    __int128 span = step > 0 ? __int128(end) - start : __int128(start) - end;
    __int128 s = step > 0 ? step : -__int128(step);
    __int128 want = span > 0 ? (span + s - 1) / s : 0;
    if (want != n)
        fail<CompileError>("internal error: op '", c.op.name, "': arange(", start, ", ", end, ", ", step, ") has ",
                           int64_t(want), " values, the IR says ", n);
    if (!fits_i32(start) || !fits_i32(step))
        fail<ExecutionError>("op '", c.op.name, "': arange start ", start, " / step ", step,
                             " does not fit the backend's 32-bit integers");
    if (type == GGML_TYPE_I32 && !fits_i32(int64_t(__int128(start) + __int128(n - 1) * step)))
        fail<ExecutionError>("op '", c.op.name, "': arange(", start, ", ", end, ", ", step,
                             ") has values that do not fit the backend's 32-bit integers");
    if (c.host()) {
        c.out = {index_kernels::arange(c.ctx, type, n, int32_t(start), int32_t(step))};
        return;
    }
    // other devices: ggml's arange (f32, exact for integers of magnitude up to 2^24), cast to the dtype
    const int64_t stop = start + n * step;
    if (step < 0 || std::max(std::llabs(start), std::llabs(stop)) > (int64_t(1) << 24))
        c.not_portable(cat("arange(", start, ", ", end, ", ", step, ") (ggml's arange counts up, exact to 2^24)"));
    c.out = {c.cast(gg::arange(c.ctx, float(start), float(stop), float(step)), type)};
}

void lower_gen_index(LowerCtx& c) {
    const Dims s = c.out_shape(0);
    int64_t axis = c.attrs<ops::GenIndexAttrs>().axis;  // in range (checked at parse)
    if (axis < 0) axis += s.rank;
    if (ggml_type_of(c.out_dtype(0)) != GGML_TYPE_I32) c.unsupported(cat("output dtype ", dtype_name(c.out_dtype(0))));
    if (s.d[axis] - 1 > kI32Max)
        fail<ExecutionError>("op '", c.op.name, "': indices up to ", s.d[axis] - 1, " do not fit the backend's 32-bit integers");
    const auto ne = s.ne();
    if (s.rank <= 4) {
        c.out = {index_kernels::gen_index(c.ctx, ne.data(), ggml_dim(int(axis), s.rank))};
        return;
    }
    // rank 5, 6: the axes before and after `axis` each merged into one (the same
    // row-major data), then seen with the output's folded ggml shape
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= s.d[i];
    for (int i = int(axis) + 1; i < s.rank; ++i) inner *= s.d[i];
    const int64_t merged[4] = {inner, s.d[axis], outer, 1};
    c.out = {gg::reshape_4d(c.ctx, index_kernels::gen_index(c.ctx, merged, 1), ne[0], ne[1], ne[2], ne[3])};
}

void lower_full(LowerCtx& c) {
    const auto ne = c.out_shape(0).ne();
    const double v = c.attrs<ops::FullAttrs>().value;
    const DType dt = c.out_dtype(0);
    switch (dt) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
            c.out = {index_kernels::fill_float(c.ctx, ggml_type_of(dt), ne.data(), float(v))};
            return;
        case DType::Bool:
            c.out = {index_kernels::fill_int(c.ctx, ne.data(), v != 0.0 ? 1 : 0)};  // NaN is true, as in numpy
            return;
        case DType::I32:
        case DType::I64: {
            if (!std::isfinite(v) || std::trunc(v) < double(kI32Min) || std::trunc(v) > double(kI32Max))
                fail<ExecutionError>("op '", c.op.name, "': value ", v, " does not fit the backend's 32-bit integers");
            c.out = {index_kernels::fill_int(c.ctx, ne.data(), int32_t(std::trunc(v)))};
            return;
        }
        case DType::U8:
        case DType::S8:
        case DType::S4:
        case DType::U4:
        case DType::F8E4M3:
        case DType::F8E5M2:
            break;  // (the op's dtype class excludes them)
    }
    c.unsupported(cat("output dtype ", dtype_name(dt)));
}

// Host CPU only (our kernel; elsewhere the op falls back to the host). Over the
// contiguous src seen with the output's (folded) ggml shape: the draws depend
// only on each element's linear index.
void lower_dropout(LowerCtx& c) {
    if (!c.host()) c.not_portable("Dropout (oneDNN's Philox generator is a kernel of ours)");
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* src = c.in[0];
    if (!ggml_is_contiguous(src)) src = gg::cont(c.ctx, src);
    if (src->ne[0] != ne[0] || src->ne[1] != ne[1] || src->ne[2] != ne[2] || src->ne[3] != ne[3])
        src = gg::reshape_4d(c.ctx, src, ne[0], ne[1], ne[2], ne[3]);
    for (size_t k = 1; k < 4; ++k)
        if (ggml_nelements(c.in[k]) != 1 || !ggml_is_contiguous(c.in[k]))
            c.internal_error(cat("Dropout input ", k, " is not one contiguous value"));
    // the kernel reads 4 bytes of each: seed and offset are i32 / i64 by the op's schema (ggml I32), the
    // probability any float type there (an IR that skipped the shape rule may give f16)
    if (c.in[3]->type != GGML_TYPE_F32) c.unsupported("a probability that is not f32");
    c.out = {kernels::dropout_dst(c.ctx, src, c.in[1], c.in[2], c.in[3])};
    if (c.op.outputs.size() > 1) c.out.push_back(kernels::dropout_mask(c.ctx, src, c.in[1], c.in[2], c.in[3]));
}

}  // namespace

void register_generate(LoweringTable& t) {
    t.add(uint16_t(K::Arange), lower_arange);
    t.add(uint16_t(K::GenIndex), lower_gen_index);
    t.add(uint16_t(K::Full), lower_full);
    t.add(uint16_t(K::Dropout), lower_dropout);
}

}  // namespace dg

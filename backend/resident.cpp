#include "resident.h"

#include <cstring>
#include <new>
#include <sys/mman.h>
#include <unistd.h>
#include <limits>

#include "errors.h"
#include "remote.h"
#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "generated/dyngraph_ir_generated.h"
#include "kernels/f32_matmul.h"
#include "kernels/f32_panels.h"
#include "kernels/quant_panels.h"

namespace dg {

namespace {

constexpr size_t kCacheLine = 64;

std::vector<int64_t> static_shape(const Program& prog, const TensorDef& t) { return prog.static_shape(t); }

int64_t numel(const std::vector<int64_t>& s) { return checked_numel(s); }

// llama.cpp's CPU_REPACK buffer type: quantized matmul weights laid out for
// its faster gemv/gemm kernels (e.g. q4_0 8x8 on AVX2); null when absent.
ggml_backend_buffer_type_t repack_buffer_type() {
    static ggml_backend_buffer_type_t buft = [] {
        using get_extra_t = ggml_backend_buffer_type_t* (*)(ggml_backend_dev_t);
        ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (!dev) return ggml_backend_buffer_type_t(nullptr);
        auto get_extra = reinterpret_cast<get_extra_t>(
            ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
        for (ggml_backend_buffer_type_t* p = get_extra ? get_extra(dev) : nullptr; p && *p; ++p)
            if (std::strcmp(ggml_backend_buft_name(*p), "CPU_REPACK") == 0) return *p;
        return ggml_backend_buffer_type_t(nullptr);
    }();
    return buft;
}

// Whether the repack buffer type takes a weight of this type and shape for
// ggml_mul_mat with f32 activations: asked the way llama.cpp asks, with a
// metadata-only op whose weight sits in a zero-size buffer of that type.
bool repack_supports(ggml_type type, int64_t k, int64_t n) {
    ggml_backend_buffer_type_t buft = repack_buffer_type();
    if (!buft) return false;
    ggml_init_params ip{4 * ggml_tensor_overhead(), nullptr, true};
    ggml_context* ctx = ggml_init(ip);
    if (!ctx) return false;
    ggml_tensor* w = ggml_new_tensor_2d(ctx, type, k, n);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, 1);
    ggml_tensor* op = ggml_mul_mat(ctx, w, x);
    ggml_backend_buffer_t dummy = ggml_backend_buft_alloc_buffer(buft, 0);
    w->buffer = dummy;
    bool ok = dummy && ggml_backend_dev_supports_op(ggml_backend_buft_get_device(buft), op);
    if (dummy) ggml_backend_buffer_free(dummy);
    ggml_free(ctx);
    return ok;
}

// Constants read only as the weight of MatMul (transpose_b): a repacked layout is invisible to everything else.
std::vector<char> matmul_only_weights(const Program& prog) {
    std::vector<char> ok(prog.tensors.size(), 1), used(prog.tensors.size(), 0);
    for (const OpDef& op : prog.ops)
        for (size_t k = 0; k < op.inputs.size(); ++k) {
            size_t t = size_t(op.inputs[k]);
            used[t] = 1;
            const auto* mm = std::get_if<ops::MatMulAttrs>(&op.attrs);
            bool weight = mm && k == 1 && mm->transpose_b;
            if (!weight) ok[t] = 0;
        }
    for (size_t i = 0; i < ok.size(); ++i) ok[i] = ok[i] && used[i] && prog.tensors[i].property == Property::Constant;
    for (const int32_t o : prog.outputs) ok[size_t(o)] = 0;
    return ok;
}

// 2-D constants read as the weight of MatMul (transpose_b) and as the table of Gather along its rows,
// both: a tied embedding and its output layer. They go into panels too, their Gathers reading rows back
// out of them (kernels/panel_rows.h).
std::vector<char> matmul_and_gathered_weights(const Program& prog) {
    std::vector<char> ok(prog.tensors.size(), 1), matmul(prog.tensors.size(), 0), gather(prog.tensors.size(), 0);
    for (const OpDef& op : prog.ops)
        for (size_t k = 0; k < op.inputs.size(); ++k) {
            const size_t t = size_t(op.inputs[k]);
            const auto* mm = std::get_if<ops::MatMulAttrs>(&op.attrs);
            const auto* ga = std::get_if<ops::GatherAttrs>(&op.attrs);
            if (mm && k == 1 && mm->transpose_b) matmul[t] = 1;
            else if (ga && k == 0 && (ga->axis == 0 || ga->axis == -2)) gather[t] = 1;
            else ok[t] = 0;
        }
    for (size_t i = 0; i < ok.size(); ++i)
        ok[i] = ok[i] && matmul[i] && gather[i] && prog.tensors[i].property == Property::Constant &&
                prog.tensors[i].shape.size() == 2;
    for (const int32_t o : prog.outputs) ok[size_t(o)] = 0;
    return ok;
}

// Drop the whole pages of a read-only file mapping from this process's
// resident memory (they are read again from the file if touched).
void release_pages(const void* p, size_t n) {
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

}  // namespace

void convert_to_ggml(DType from, const void* src, ggml_type to, void* dst, int64_t n, int64_t row, const std::string& what) {
    if (host_matches_ggml(from) && to == ggml_type_of(from)) {
        std::memcpy(dst, src, size_t(n) * dtype_size(from));
        return;
    }
    if (to == GGML_TYPE_I32 && from == DType::I64) {
        const int64_t* s = static_cast<const int64_t*>(src);
        int32_t* d = static_cast<int32_t*>(dst);
        for (int64_t i = 0; i < n; ++i) {
            if (s[i] < std::numeric_limits<int32_t>::min() || s[i] > std::numeric_limits<int32_t>::max())
                fail<ExecutionError>(what, ": i64 value ", s[i], " at element ", i, " does not fit the backend's 32-bit integers");
            d[i] = int32_t(s[i]);
        }
        return;
    }
    if (to == GGML_TYPE_I32 && from == DType::Bool) {
        const uint8_t* s = static_cast<const uint8_t*>(src);
        int32_t* d = static_cast<int32_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = s[i] ? 1 : 0;
        return;
    }
    bool float_from = from == DType::F32 || from == DType::F16 || from == DType::BF16;
    if (!float_from || to == GGML_TYPE_I32)
        fail<DTypeError>(what, ": cannot store ", dtype_name(from), " data as ", ggml_type_name(to));
    std::vector<float> tmp;
    const float* f = static_cast<const float*>(src);
    if (from != DType::F32) {
        tmp.resize(size_t(n));
        if (from == DType::F16) ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t*>(src), tmp.data(), n);
        else ggml_bf16_to_fp32_row(static_cast<const ggml_bf16_t*>(src), tmp.data(), n);
        f = tmp.data();
    }
    switch (to) {
        case GGML_TYPE_F32: std::memcpy(dst, f, size_t(n) * 4); return;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(f, static_cast<ggml_fp16_t*>(dst), n); return;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(f, static_cast<ggml_bf16_t*>(dst), n); return;
        default:
            if (row <= 0 || n % row != 0 || row % ggml_blck_size(to) != 0)
                fail<CompileError>(what, ": rows of ", row, " values cannot be stored as ", ggml_type_name(to));
            // (ggml asserts, ending the process, where these come without an importance matrix: their
            // blocks come from a quantizer that has one, a GGUF file's, as stored)
            if (ggml_quantize_requires_imatrix(to))
                fail<CompileError>(what, ": f32 values cannot be quantized to ", ggml_type_name(to),
                                   " here (ggml needs an importance matrix for it); pass its blocks as stored");
            ggml_quantize_chunk(to, f, dst, 0, n / row, row, nullptr);
    }
}

void convert_from_ggml(ggml_type from, const void* src, DType to, void* dst, int64_t n) {
    if (host_matches_ggml(to)) {
        std::memcpy(dst, src, size_t(n) * dtype_size(to));
        return;
    }
    const int32_t* s = static_cast<const int32_t*>(src);
    (void)from;
    if (to == DType::I64) {
        int64_t* d = static_cast<int64_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    } else {
        uint8_t* d = static_cast<uint8_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = s[i] != 0;
    }
}

ResidentTensors::ResidentTensors(const Program& prog, const std::map<int32_t, HostData>& external, bool borrow_embedded,
                                 bool repack, const ResidentPlace* place)
    : prog_(prog) {
    if (place) {
        device_ = true;
        conns_ = place->conns;
        borrow_embedded = false;  // device memory: every constant is uploaded
        repack = false;           // (CPU_REPACK is the host CPU's layout)
    }
    auto held = [&](size_t i) { return !place || place->subset[i]; };
    try {
    std::map<int32_t, const DataRef*> embedded;
    for (const auto& d : prog.data) embedded[d.tensor] = &d;
    std::vector<char> repacked(prog.tensors.size(), 0), panels(prog.tensors.size(), 0);
    const std::vector<char> weights = repack ? matmul_only_weights(prog) : std::vector<char>();
    const std::vector<char> tied = repack ? matmul_and_gathered_weights(prog) : std::vector<char>();
    // f32 and quantized weights in panels for our product (kernels/f32_panels.h, quant_panels.h), in place of their [N, K]
    // rows, also where Gathers read their rows (tied)
    if (repack)
        for (size_t i = 0; i < prog.tensors.size(); ++i) {
            const TensorDef& t = prog.tensors[i];
            if (!(weights[i] || tied[i]) || t.shape.size() != 2) continue;
            const bool quant = t.storage != Storage::Default && kernels::quant_panels_take(ggml_type_of(t.storage, t.dtype)) &&
                               kernels::quant_panels_wanted();
            // f32, f16 and bf16 (a GGUF F16 or BF16 file's, weight_type="f16") weights
            const ggml_type type = ggml_type_of(t.storage, t.dtype);
            const bool floats = (t.storage == Storage::Default && t.dtype == DType::F32) || type == GGML_TYPE_F16 ||
                                type == GGML_TYPE_BF16;
            panels[i] = quant || (floats && kernels::f32_panels_wanted());
        }
    if (repack && repack_buffer_type()) {
        for (size_t i = 0; i < prog.tensors.size(); ++i) {
            const TensorDef& t = prog.tensors[i];
            if (!weights[i] || panels[i] || t.storage == Storage::Default || t.shape.size() != 2) continue;
            int64_t n = prog.const_value(t.shape[0]), k = prog.const_value(t.shape[1]);
            const ggml_type type = ggml_type_of(t.storage, t.dtype);
            repacked[i] = kernels::prefer_ggml_repack(type) && repack_supports(type, k, n);
        }
    }
    // constants whose embedded bytes are already what ggml computes on, and aligned:
    // used where they lie when the caller keeps the IR buffer alive (a loaded file's mapping).
    // Where weights are laid out for a kernel (panels, ggml's repacking), their pages of the file are
    // released after it; the kernel maps a file in folios of up to 2 MiB, so a small constant read in
    // place would map its neighbours' released pages back with it (SmolLM2 in panels: 124 MiB more
    // resident after the first step, its norms' weights): such constants are copied instead.
    bool releases = false;
    for (size_t i = 0; i < panels.size(); ++i)
        releases = releases || ((panels[i] || repacked[i]) && embedded.count(int32_t(i)));
    constexpr size_t kFolioBytes = size_t(2) << 20;
    auto borrowable = [&](int32_t i) -> const uint8_t* {
        const TensorDef& t = prog.tensors[size_t(i)];
        auto e = embedded.find(i);
        if (!borrow_embedded || t.property != Property::Constant || e == embedded.end() || repacked[size_t(i)] ||
            panels[size_t(i)] || (releases && e->second->size < kFolioBytes))
            return nullptr;
        if (t.storage == Storage::Default && !host_matches_ggml(t.dtype)) return nullptr;
        if (reinterpret_cast<uintptr_t>(e->second->data) % 64 != 0) return nullptr;
        return e->second->data;
    };
    by_index_.assign(prog.tensors.size(), nullptr);
    size_t n_resident = 0;
    for (size_t i = 0; i < prog.tensors.size(); ++i) n_resident += prog.tensors[i].property != Property::Variable && held(i);
    ggml_init_params ip{(n_resident + 1) * ggml_tensor_overhead(), nullptr, true};
    ctx_ = ggml_init(ip);
    if (!ctx_) fail<ExecutionError>("ggml_init failed for the partition's resident tensors");
    // constants, repacked weights, state: separate buffers (state is cleared on its own)
    std::vector<ggml_tensor*> consts, packed, states;
    for (size_t i = 0; i < prog.tensors.size(); ++i) {
        const TensorDef& t = prog.tensors[i];
        if (t.property == Property::Variable || !held(i)) continue;
        auto shape = static_shape(prog, t);
        const std::array<int64_t, 4> ne = folded_ne(shape.data(), int(shape.size()));
        ggml_type type = ggml_type_of(t.storage, t.dtype);
        if (ne[0] % ggml_blck_size(type) != 0)
            fail<IRError>("tensor ", t.label(), ": rows of ", ne[0], " values cannot be stored as ", ggml_type_name(type));
        ggml_tensor* g = ggml_new_tensor(ctx_, type, 4, ne.data());
        ggml_set_name(g, t.name.substr(0, GGML_MAX_NAME - 1).c_str());
        by_index_[i] = g;
        if (const uint8_t* p = borrowable(int32_t(i))) {
            g->data = const_cast<uint8_t*>(p);  // read only: constants are never written
            borrowed_bytes_ += ggml_nbytes(g);
            continue;
        }
        (t.property == Property::State ? states : repacked[i] ? packed : consts).push_back(g);
    }
    // host memory of our own (huge pages) for plain CPU buffers, `buft`'s own allocation otherwise
    // (zeroed: host memory of our own comes zero-filled, a device's buffer is cleared)
    auto alloc = [&](std::vector<ggml_tensor*>& ts, ggml_backend_buffer_t& buf, const char* what,
                     AlignedBuffer* mem, ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type(),
                     bool zeroed = false) {
        if (ts.empty()) return;
        if (place) {  // the device's own allocation
            buft = place->buft;
            mem = nullptr;
        }
        size_t align = ggml_backend_buft_get_alignment(buft), total = 0;
        if (align == 0 || (align & (align - 1)) != 0)  // (a device's answer: checked when it was opened, and here)
            fail<DeviceError>("device ", place ? place->device : std::string("CPU"), " reported an alignment of ", align,
                              " (not a power of two)");
        // host tensors whole cache lines apart (ggml's CPU buffers align to 32 bytes: weights in panels 32
        // bytes off a line split every vector load of their products across two lines)
        if (!place) align = std::max(align, kCacheLine);
        for (auto* g : ts) {
            // (a device may pad a tensor: CUDA pads quantized rows; its allocator places by that size)
            const size_t n = place ? ggml_backend_buft_get_alloc_size(buft, g) : ggml_nbytes(g);
            if (n > SIZE_MAX - align || total > SIZE_MAX - (n + align))
                fail<ExecutionError>("the partition's ", what, " need more bytes than an address can hold");
            total += (n + align - 1) / align * align;
        }
        if (place) {
            size_t max = ggml_backend_buft_get_max_size(buft);
            if (total > max)
                fail<ExecutionError>("the partition's ", what, " on device ", place->device, " need ", total,
                                     " bytes in one buffer, more than its ", max);
        } else if (physical_memory() > 0 && total > physical_memory())
            fail<ExecutionError>("the partition's ", what, " need ", total, " bytes, more than this machine's ",
                                 physical_memory(), " bytes of memory");
        if (mem) {
            try {
                if (zeroed) mem->reserve_zeroed(total);
                else mem->reserve(total);
            } catch (const std::bad_alloc&) {
                fail<ExecutionError>("cannot allocate ", total, " bytes for the partition's ", what);
            }
            buf = ggml_backend_cpu_buffer_from_ptr(mem->data(), total);
        } else {
            buf = ggml_backend_buft_alloc_buffer(buft, total);
            if (buf && ggml_backend_buffer_is_host(buf)) advise_huge_pages(ggml_backend_buffer_get_base(buf), total);  // not written yet
        }
        if (!buf)
            fail<ExecutionError>("cannot allocate ", total, " bytes for the partition's ", what,
                                 place ? cat(" on device ", place->device) : std::string());
        if (zeroed && !mem) ggml_backend_buffer_clear(buf, 0);
        ggml_tallocr ta = ggml_tallocr_new(buf);
        // (a base off a line, which ggml's and our allocations never give: the buffer's own alignment)
        if (reinterpret_cast<uintptr_t>(ta.base) % align == 0) ta.alignment = std::max(ta.alignment, align);
        for (auto* g : ts)
            if (ggml_tallocr_alloc(&ta, g) != GGML_STATUS_SUCCESS)
                fail<ExecutionError>("cannot place a ", what, " tensor in its buffer");
    };
    alloc(consts, const_buf_, "constants", &const_mem_);
    alloc(packed, packed_buf_, "repacked weights", nullptr, repack_buffer_type());
    alloc(states, state_buf_, "state", &state_mem_, ggml_backend_cpu_buffer_type(), true);

    for (size_t i = 0; i < prog.tensors.size(); ++i) {
        const TensorDef& t = prog.tensors[i];
        if (t.property == Property::Variable || !held(i) || borrowable(int32_t(i))) continue;
        auto shape = static_shape(prog, t);
        int64_t n = numel(shape), row = shape.empty() ? 1 : shape.back();
        ggml_tensor* g = by_index_[i];
        std::string what = cat("tensor ", t.label());
        auto ext = external.find(int32_t(i));
        auto emb = embedded.find(int32_t(i));
        if (panels[i]) {
            pack_weights(g, t, ext != external.end() ? &ext->second : nullptr,
                         emb != embedded.end() ? emb->second : nullptr, borrow_embedded, what);
            continue;
        }
        if (repacked[i]) {
            // the repack buffer converts on upload and cannot be read back: the storage bytes are
            // kept for save() (a loaded file keeps them: its pages are released after the upload)
            PackedSource& src = packed_source_[int32_t(i)];
            src.size = ggml_nbytes(g);
            if (ext != external.end()) {
                if (ext->second.nbytes != size_t(n) * dtype_size(t.dtype))
                    fail<CompileError>(what, ": data has ", ext->second.nbytes, " bytes, expected ", size_t(n) * dtype_size(t.dtype));
                src.own.resize(src.size);
                convert_to_ggml(t.dtype, ext->second.data, g->type, src.own.data(), n, row, what);
                src.ptr = src.own.data();
            } else if (emb != embedded.end() && borrow_embedded) {
                src.ptr = emb->second->data;
            } else if (emb != embedded.end()) {
                src.own.assign(emb->second->data, emb->second->data + src.size);
                src.ptr = src.own.data();
            } else {
                fail<CompileError>("constant ", t.label(), " has no data");
            }
            ggml_backend_tensor_set(g, src.ptr, 0, src.size);
            if (src.own.empty()) release_pages(src.ptr, src.size);
            continue;
        }
        if (ext != external.end()) {
            size_t want = size_t(n) * dtype_size(t.dtype);
            if (ext->second.nbytes != want)
                fail<CompileError>(what, ": data has ", ext->second.nbytes, " bytes, expected ", want);
            if (device_) {
                std::vector<uint8_t> tmp(ggml_nbytes(g));
                convert_to_ggml(t.dtype, ext->second.data, g->type, tmp.data(), n, row, what);
                put(g, tmp.data(), tmp.size());
            } else {
                convert_to_ggml(t.dtype, ext->second.data, g->type, g->data, n, row, what);
            }
            if (t.property == Property::State) {
                const uint8_t* p = static_cast<const uint8_t*>(ext->second.data);
                initial_state_[int32_t(i)].assign(p, p + want);
            }
        } else if (emb != embedded.end()) {
            // embedded data is already in the storage type (or the host layout for Default storage)
            if (device_) {
                std::vector<uint8_t> tmp(ggml_nbytes(g));
                if (t.storage == Storage::Default) convert_to_ggml(t.dtype, emb->second->data, g->type, tmp.data(), n, row, what);
                else std::memcpy(tmp.data(), emb->second->data, std::min(tmp.size(), emb->second->size));
                put(g, tmp.data(), tmp.size());
            } else if (t.storage == Storage::Default) {
                convert_to_ggml(t.dtype, emb->second->data, g->type, g->data, n, row, what);
            } else {
                std::memcpy(g->data, emb->second->data, emb->second->size);
            }
            if (t.property == Property::State)
                initial_state_[int32_t(i)].assign(emb->second->data, emb->second->data + emb->second->size);
        } else if (t.property == Property::Constant) {
            fail<CompileError>("constant ", t.label(), " has no data");
        }
    }
    } catch (...) {
        free_buffers();
        throw;
    }
}

void ResidentTensors::pack_weights(ggml_tensor* g, const TensorDef& t, const HostData* ext, const DataRef* emb,
                                   bool borrowed, const std::string& what) {
    const int64_t K = g->ne[0], N = g->ne[1];
    const bool quant = g->type != GGML_TYPE_F32;
    const size_t want = ggml_nbytes(g);  // (quantized: the storage's bytes; f32: the host layout's)
    const void* src = ext ? ext->data : emb ? static_cast<const void*>(emb->data) : nullptr;
    if (!src) fail<CompileError>(what, " is a constant and has no data");
    const size_t expect = ext ? size_t(K) * size_t(N) * dtype_size(t.dtype) : want;
    const size_t have = ext ? ext->nbytes : emb->size;
    if (have != expect) fail<CompileError>(what, ": data has ", have, " bytes, expected ", expect);
    std::vector<uint8_t> staged;  // bytes to pack from where the source is not them, or not aligned
    if (quant && ext) {  // given in its dtype: rounded to the storage type first
        staged.resize(want);
        convert_to_ggml(t.dtype, src, g->type, staged.data(), int64_t(K) * N, K, what);
        src = staged.data();
    } else if (reinterpret_cast<uintptr_t>(src) % alignof(float) != 0) {
        // (bytes embedded in a file need not lie 4 bytes apart)
        staged.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + want);
        src = staged.data();
    }
    // Rows [r0, r0 + n) in panels: a panel's place depends only on its first row, so slices of whole
    // panels pack as the whole does. A loaded file's pages are released after each slice of 8 MiB (read
    // again if touched): a large table (SmolLM2's tied embedding, 108 MiB in f32) is then never in memory
    // twice, the file's pages and the panels (peak RSS of a generation 1.24x its budget before, 1.07x after).
    const bool release = !ext && borrowed;
    const size_t row_bytes = N > 0 ? want / size_t(N) : 0;
    const bool half = g->type == GGML_TYPE_F16 || g->type == GGML_TYPE_BF16;
    const int64_t width = quant && !half ? kernels::kQuantPanelWidth : kernels::kPanelWidth;
    const int64_t slice = release && row_bytes > 0 ? std::max<int64_t>(1, int64_t((size_t(8) << 20) / row_bytes) / width) * width : N;
    for (int64_t r0 = 0; r0 < N; r0 += slice) {
        const int64_t n = std::min(slice, N - r0);
        const size_t at = size_t(r0) * row_bytes;
        const uint8_t* s = static_cast<const uint8_t*>(src) + at;
        uint8_t* d = static_cast<uint8_t*>(g->data) + at;
        if (g->type == GGML_TYPE_BF16 && kernels::bf16_pair_panels(K))
            kernels::pack_bf16_pair_panels(n, K, reinterpret_cast<const uint16_t*>(s), reinterpret_cast<uint16_t*>(d));
        else if (half)
            kernels::pack_half_panels(n, K, reinterpret_cast<const uint16_t*>(s), reinterpret_cast<uint16_t*>(d));
        else if (quant)
            kernels::pack_quant_panels(g->type, n, K / ggml_blck_size(g->type), s, d);
        else
            kernels::pack_panels(n, K, reinterpret_cast<const float*>(s), K, reinterpret_cast<float*>(d));
        if (release) release_pages(emb->data + at, size_t(n) * row_bytes);
    }
    kernels::mark_panels(g);
    panel_bytes_ += want;
    if (release) release_pages(emb->data, emb->size);  // (the pages the slices shared)
}

void ResidentTensors::free_buffers() {
    bool leak = false;  // a lost remote device: freeing its buffers would send messages on a dead connection
    for (const remote::Connection* c : conns_) leak = leak || c->dead();
    if (!leak) {
        try {
            remote::guarded(conns_, "freeing a partition's weights and state", [&] {
                for (ggml_backend_buffer_t* b : {&const_buf_, &packed_buf_, &state_buf_})
                    if (*b) {
                        ggml_backend_buffer_t buf = *b;
                        *b = nullptr;
                        ggml_backend_buffer_free(buf);
                    }
            });
        } catch (...) {  // lost while freeing: what is left is leaked
        }
    }
    const_buf_ = packed_buf_ = state_buf_ = nullptr;
    if (ctx_) ggml_free(ctx_);
    ctx_ = nullptr;
}

ResidentTensors::~ResidentTensors() { free_buffers(); }

void ResidentTensors::put(ggml_tensor* g, const void* src, size_t n) const {
    if (device_) ggml_backend_tensor_set(g, src, 0, n);
    else std::memcpy(g->data, src, n);
}

void ResidentTensors::take(const ggml_tensor* g, void* dst, size_t n) const {
    if (device_) ggml_backend_tensor_get(g, dst, 0, n);
    else std::memcpy(dst, g->data, n);
}

size_t ResidentTensors::constant_bytes() const {
    return (const_buf_ ? ggml_backend_buffer_get_size(const_buf_) : 0) +
           (packed_buf_ ? ggml_backend_buffer_get_size(packed_buf_) : 0) + borrowed_bytes_;
}

size_t ResidentTensors::repacked_bytes() const { return packed_buf_ ? ggml_backend_buffer_get_size(packed_buf_) : 0; }
size_t ResidentTensors::state_bytes() const { return state_buf_ ? ggml_backend_buffer_get_size(state_buf_) : 0; }

size_t ResidentTensors::host_nbytes(int32_t index) const {
    const TensorDef& t = prog_.tensors[size_t(index)];
    return host_bytes(t, static_shape(prog_, t));
}

std::vector<uint8_t> ResidentTensors::export_data(int32_t index) const {
    const TensorDef& t = prog_.tensors[size_t(index)];
    if (t.property == Property::State) {
        auto it = initial_state_.find(index);
        return it == initial_state_.end() ? std::vector<uint8_t>{} : it->second;
    }
    ggml_tensor* g = by_index_[size_t(index)];
    auto packed = packed_source_.find(index);
    if (packed != packed_source_.end()) return {packed->second.ptr, packed->second.ptr + packed->second.size};
    std::vector<uint8_t> out(host_nbytes(index));
    if (kernels::in_panels(g) && g->type == GGML_TYPE_BF16 && kernels::bf16_pair_panels(g->ne[0])) {  // (pairs of k)
        kernels::unpack_bf16_pair_panels(g->ne[1], g->ne[0], static_cast<const uint16_t*>(g->data), reinterpret_cast<uint16_t*>(out.data()));
    } else if (kernels::in_panels(g) && (g->type == GGML_TYPE_F16 || g->type == GGML_TYPE_BF16)) {  // back to [N, K] rows of them
        kernels::unpack_half_panels(g->ne[1], g->ne[0], static_cast<const uint16_t*>(g->data), reinterpret_cast<uint16_t*>(out.data()));
    } else if (kernels::in_panels(g) && g->type != GGML_TYPE_F32) {  // back to rows of blocks (the storage's bytes)
        kernels::unpack_quant_panels(g->type, g->ne[1], g->ne[0] / ggml_blck_size(g->type),
                                     static_cast<const uint8_t*>(g->data), out.data());
    } else if (kernels::in_panels(g)) {  // back to [N, K] rows (f32: the host layout)
        kernels::unpack_panels(g->ne[1], g->ne[0], static_cast<const float*>(g->data), reinterpret_cast<float*>(out.data()));
    } else if (t.storage != Storage::Default) {
        take(g, out.data(), out.size());
    } else if (device_) {
        std::vector<uint8_t> tmp(ggml_nbytes(g));
        take(g, tmp.data(), tmp.size());
        convert_from_ggml(g->type, tmp.data(), t.dtype, out.data(), ggml_nelements(g));
    } else {
        convert_from_ggml(g->type, g->data, t.dtype, out.data(), ggml_nelements(g));
    }
    return out;
}

void ResidentTensors::read_state(int32_t index, void* dst, size_t nbytes) const {
    const TensorDef& t = prog_.tensors[size_t(index)];
    if (nbytes != host_nbytes(index)) fail<ShapeError>("state ", t.label(), ": buffer has ", nbytes, " bytes, need ", host_nbytes(index));
    ggml_tensor* g = by_index_[size_t(index)];
    if (device_) {
        std::vector<uint8_t> tmp(ggml_nbytes(g));
        take(g, tmp.data(), tmp.size());
        convert_from_ggml(g->type, tmp.data(), t.dtype, dst, ggml_nelements(g));
        return;
    }
    convert_from_ggml(g->type, g->data, t.dtype, dst, ggml_nelements(g));
}

void ResidentTensors::write_state(int32_t index, const void* src, size_t nbytes) {
    const TensorDef& t = prog_.tensors[size_t(index)];
    if (nbytes != host_nbytes(index)) fail<ShapeError>("state ", t.label(), ": data has ", nbytes, " bytes, need ", host_nbytes(index));
    ggml_tensor* g = by_index_[size_t(index)];
    int64_t n = ggml_nelements(g);
    // convert into a scratch copy first: a value that does not fit leaves the state untouched
    std::vector<uint8_t> tmp(ggml_nbytes(g));
    convert_to_ggml(t.dtype, src, g->type, tmp.data(), n, g->ne[0], cat("state ", t.label()));
    put(g, tmp.data(), tmp.size());
}

void ResidentTensors::reset_state() {
    for (size_t i = 0; i < prog_.tensors.size(); ++i) {
        if (prog_.tensors[i].property != Property::State || !by_index_[i]) continue;
        ggml_tensor* g = by_index_[i];
        auto it = initial_state_.find(int32_t(i));
        if (it == initial_state_.end() && device_) ggml_backend_tensor_memset(g, 0, 0, ggml_nbytes(g));
        else if (it == initial_state_.end()) std::memset(g->data, 0, ggml_nbytes(g));
        else write_state(int32_t(i), it->second.data(), it->second.size());
    }
}

}  // namespace dg

#include "derived_constants.h"

#include <new>

#include "errors.h"
#include "ggml-cpu.h"

namespace dg {

DerivedConstants::Entry::~Entry() {
    if (buf) ggml_backend_buffer_free(buf);
    if (ctx) ggml_free(ctx);
}

ggml_tensor* DerivedConstants::get(const ggml_tensor* source, int kind, const std::vector<int64_t>& params,
                                   const int64_t ne[4], const std::function<void(float* dst)>& make) {
    Key key{source, kind, params};
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second->t;
    auto e = std::make_unique<Entry>();
    ggml_init_params ip{ggml_tensor_overhead(), nullptr, true};
    e->ctx = ggml_init(ip);
    if (!e->ctx) fail<ExecutionError>("ggml_init failed for a tensor derived from a constant");
    e->t = ggml_new_tensor_4d(e->ctx, GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
    const size_t n = ggml_nbytes(e->t);
    try {
        e->mem.reserve(n);
    } catch (const std::bad_alloc&) {
        fail<ExecutionError>("cannot allocate ", n, " bytes for a tensor derived from a constant");
    }
    e->buf = ggml_backend_cpu_buffer_from_ptr(e->mem.data(), n);
    if (!e->buf || ggml_backend_tensor_alloc(e->buf, e->t, e->mem.data()) != GGML_STATUS_SUCCESS)
        fail<ExecutionError>("cannot place a tensor derived from a constant in its buffer");
    make(static_cast<float*>(e->t->data));
    bytes_ += n;
    ggml_tensor* t = e->t;
    entries_.emplace(std::move(key), std::move(e));
    return t;
}

}  // namespace dg

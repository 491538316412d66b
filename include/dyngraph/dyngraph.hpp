// dyngraph's C API for C++ (header-only, C++17): RAII handles, exceptions
// (dyngraph::error with the status and message), span-like views.
//
//   dyngraph::partition p = dyngraph::partition::load("mlp.dg", "cpu:4");
//   std::vector<dyngraph::desc> out = p.infer_outputs({x_desc});
//   p.execute({{x_desc, x.data()}}, {{out[0], y.data()}});
#ifndef DYNGRAPH_HPP
#define DYNGRAPH_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dyngraph.h"

namespace dyngraph {

class error : public std::runtime_error {
public:
    error(dg_status s, const char* what) : std::runtime_error(std::string(dg_status_name(s)) + ": " + what), status_(s) {}
    dg_status status() const noexcept { return status_; }

private:
    dg_status status_;
};

inline void check(dg_status s) {
    if (s != DG_OK) throw error(s, dg_last_error());
}

// A contiguous view (std::span for C++17).
template <class T>
class span {
public:
    span() = default;
    span(T* data, size_t size) : data_(data), size_(size) {}
    template <class C>
    span(C& c) : data_(c.data()), size_(c.size()) {}
    T* data() const { return data_; }
    size_t size() const { return size_; }
    T& operator[](size_t i) const { return data_[i]; }
    T* begin() const { return data_; }
    T* end() const { return data_ + size_; }

private:
    T* data_ = nullptr;
    size_t size_ = 0;
};

using desc = dg_desc;

inline int64_t numel(const desc& d) {
    int64_t n = 1;
    for (int32_t i = 0; i < d.ndims; ++i) n *= d.dims[i];
    return n;
}
inline size_t nbytes(const desc& d) { return size_t(numel(d)) * dg_dtype_size(d.dtype); }

// A concrete description of dims `shape` for tensor `like` (its id and dtype).
inline desc with_shape(const desc& like, std::initializer_list<int64_t> shape) {
    desc d = like;
    d.ndims = int32_t(shape.size());
    int32_t i = 0;
    for (int64_t v : shape) d.dims[i++] = v;
    return d;
}

struct in_tensor {
    desc d;
    const void* data;
};
struct out_tensor {
    desc d;
    void* data;
};

struct port {
    desc symbolic;
    std::vector<dg_dim> dims;  // ndims entries
    std::string name;
};

class partition {
public:
    static partition load(const std::string& path, const std::string& engine = "cpu") {
        dg_partition* p = nullptr;
        check(dg_partition_load(path.c_str(), engine.c_str(), &p));
        return partition(p);
    }
    static partition load_bytes(const void* data, size_t size, const std::string& engine = "cpu") {
        dg_partition* p = nullptr;
        check(dg_partition_load_bytes(data, size, engine.c_str(), &p));
        return partition(p);
    }
    partition(partition&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    partition& operator=(partition&& o) noexcept {
        if (this != &o) {
            dg_partition_destroy(p_);
            p_ = std::exchange(o.p_, nullptr);
        }
        return *this;
    }
    partition(const partition&) = delete;
    partition& operator=(const partition&) = delete;
    ~partition() { dg_partition_destroy(p_); }

    dg_partition* get() const noexcept { return p_; }
    int32_t num_inputs() const { return dg_partition_num_inputs(p_); }
    int32_t num_outputs() const { return dg_partition_num_outputs(p_); }
    int32_t num_states() const { return dg_partition_num_states(p_); }

    port input(int32_t i) const { return port_of(i, true); }
    port output(int32_t i) const { return port_of(i, false); }

    std::vector<desc> infer_outputs(span<const desc> in) {
        std::vector<desc> out(static_cast<size_t>(num_outputs()));
        check(dg_partition_infer_outputs(p_, in.data(), int32_t(in.size()), out.data(), int32_t(out.size())));
        return out;
    }

    std::vector<desc> infer_outputs(std::initializer_list<desc> in) { return infer_outputs(span<const desc>(in.begin(), in.size())); }

    void execute(std::initializer_list<in_tensor> in, std::initializer_list<out_tensor> out) {
        execute(span<const in_tensor>(in.begin(), in.size()), span<const out_tensor>(out.begin(), out.size()));
    }
    void execute(span<const in_tensor> in, span<const out_tensor> out) {
        std::vector<desc> di(in.size()), dout(out.size());
        std::vector<const void*> pi(in.size());
        std::vector<void*> po(out.size());
        for (size_t i = 0; i < in.size(); ++i) di[i] = in[i].d, pi[i] = in[i].data;
        for (size_t i = 0; i < out.size(); ++i) dout[i] = out[i].d, po[i] = out[i].data;
        check(dg_partition_execute(p_, di.data(), pi.data(), int32_t(di.size()), dout.data(), po.data(), int32_t(dout.size())));
    }
    // No allocation: the arrays as the C API takes them.
    void execute(const desc* in, const void* const* in_data, int32_t n_in, const desc* out, void* const* out_data,
                 int32_t n_out) {
        check(dg_partition_execute(p_, in, in_data, n_in, out, out_data, n_out));
    }

    void reset_state() { check(dg_partition_reset_state(p_)); }
    void read_state(int32_t k, void* dst, size_t n) { check(dg_partition_read_state(p_, k, dst, n)); }
    void write_state(int32_t k, const void* src, size_t n) { check(dg_partition_write_state(p_, k, src, n)); }

    dg_cache_info cache_info() const {
        dg_cache_info c;
        check(dg_partition_cache_info(p_, &c));
        return c;
    }

private:
    explicit partition(dg_partition* p) : p_(p) {}
    port port_of(int32_t i, bool in) const {
        port r;
        dg_dim dims[DG_MAX_NDIMS];
        const char* name = nullptr;
        check(in ? dg_partition_input(p_, i, &r.symbolic, dims, &name) : dg_partition_output(p_, i, &r.symbolic, dims, &name));
        r.dims.assign(dims, dims + r.symbolic.ndims);
        r.name = name ? name : "";
        return r;
    }
    dg_partition* p_ = nullptr;
};

}  // namespace dyngraph

#endif  // DYNGRAPH_HPP

// Tensors a compiled partition owns for its whole life: constants (weights,
// uploaded once and shared by every graph it builds) and state (a KV cache:
// persistent, updated in place by the ops that write it).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "aligned_buffer.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "program.h"
#include "remote.h"

namespace dg {

// Where a ResidentTensors lives when it is not the host CPU path: the
// tensors it holds (those the device's ops read) and the device's memory.
struct ResidentPlace {
    std::vector<char> subset;                   // per tensor index: held here
    ggml_backend_buffer_type_t buft = nullptr;  // the device's memory
    std::string device;                         // its name, for messages
    std::vector<remote::Connection*> conns;     // remote: freed only while these live
};

// Host data given at compile for a tensor, in its logical dtype.
struct HostData {
    const void* data;
    size_t nbytes;
};

class ResidentTensors {
public:
    // `external` (by tensor index) holds data the IR does not embed. With
    // `borrow_embedded`, constants embedded in the IR in their final form are
    // used in place (the caller keeps the IR buffer alive and unchanged).
    // With `repack`, quantized weights read only by MatMul go to ggml's
    // CPU_REPACK buffer type (a layout its faster kernels read), and f32 ones
    // are laid out in panels (kernels/f32_panels.h, quant_panels.h) where f32_panels_wanted() / quant_panels_wanted().
    // With `place`, only its subset is held, in its device's memory (no borrowing, no repacking; the
    // caller guards the calls: a remote device's uploads go over the network).
    ResidentTensors(const Program& prog, const std::map<int32_t, HostData>& external, bool borrow_embedded = false,
                    bool repack = true, const ResidentPlace* place = nullptr);
    ~ResidentTensors();
    ResidentTensors(const ResidentTensors&) = delete;
    ResidentTensors& operator=(const ResidentTensors&) = delete;

    ggml_tensor* tensor(int32_t index) const { return by_index_[size_t(index)]; }
    bool holds(int32_t index) const { return by_index_[size_t(index)] != nullptr; }
    size_t constant_bytes() const;  // including the borrowed ones
    size_t borrowed_bytes() const { return borrowed_bytes_; }
    size_t repacked_bytes() const;
    size_t panel_bytes() const { return panel_bytes_; }  // f32 and quantized weights in panels (part of constant_bytes)
    size_t state_bytes() const;

    // Host-format bytes of a constant (storage format when quantized), or a
    // state's initial value (empty when it starts at zeros): what a saved IR embeds.
    std::vector<uint8_t> export_data(int32_t index) const;
    // State: read into / write from host memory in the logical dtype; reset to the initial value.
    void read_state(int32_t index, void* dst, size_t nbytes) const;
    void write_state(int32_t index, const void* src, size_t nbytes);
    void reset_state();
    size_t host_nbytes(int32_t index) const;

private:
    void free_buffers();
    // Constant g (tensor t), an f32 or quantized (quant_panels.h) weight read only by MatMul, written in panels from its
    // [N, K] rows (`ext`, in t's dtype, else `emb`, in its storage; `borrowed`: emb lies in a loaded
    // file whose pages can be dropped after).
    void pack_weights(ggml_tensor* g, const TensorDef& t, const HostData* ext, const DataRef* emb, bool borrowed,
                      const std::string& what);
    // Bytes into / out of a held tensor, wherever its memory is.
    void put(ggml_tensor* g, const void* src, size_t n) const;
    void take(const ggml_tensor* g, void* dst, size_t n) const;

    const Program& prog_;
    bool device_ = false;                      // in a device's memory (not host memory)
    std::vector<remote::Connection*> conns_;
    ggml_context* ctx_ = nullptr;
    AlignedBuffer const_mem_{true}, state_mem_{true};  // the memory of const_buf_, state_buf_ (huge pages)
    ggml_backend_buffer_t const_buf_ = nullptr;
    ggml_backend_buffer_t state_buf_ = nullptr;
    ggml_backend_buffer_t packed_buf_ = nullptr;
    struct PackedSource {  // the storage bytes of a repacked weight (for export)
        std::vector<uint8_t> own;  // a copy, or empty when they lie in the borrowed IR buffer
        const uint8_t* ptr = nullptr;
        size_t size = 0;
    };
    std::map<int32_t, PackedSource> packed_source_;
    std::vector<ggml_tensor*> by_index_;
    std::map<int32_t, std::vector<uint8_t>> initial_state_;  // host format
    size_t borrowed_bytes_ = 0;
    size_t panel_bytes_ = 0;
};

// Convert `n` values of logical dtype `from` (host layout) into ggml type `to`.
// Throws CompileError (naming `what`) when a value does not fit.
void convert_to_ggml(DType from, const void* src, ggml_type to, void* dst, int64_t n, int64_t row, const std::string& what);
// Convert ggml-held values back to the host layout of `to`.
void convert_from_ggml(ggml_type from, const void* src, DType to, void* dst, int64_t n);

}  // namespace dg

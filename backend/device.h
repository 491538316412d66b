// Devices: where a compiled partition's ops run, as ggml backend devices.
//
// The host CPU is not a Device object: a CPU engine runs dyngraph's own CPU
// path (engine.h). A Device is anything else ggml has a backend for: a GPU
// ggml was built with (CUDA, Vulkan, ...) or a device of a ggml RPC server
// (remote.h). Its memory is not the host's: weights and state are uploaded to
// it, inputs and outputs copied to and from it.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "remote.h"

namespace dg {

struct DeviceInfo {
    std::string kind;  // "cpu", "gpu", "igpu", "accel" or "rpc"
    std::string name, description;
    std::string endpoint;  // rpc: the server
    size_t memory_free = 0, memory_total = 0;
};

class Device {
public:
    // The devices of an RPC server (one per device it serves).
    static std::vector<std::shared_ptr<Device>> open_rpc(const std::string& endpoint, double connect_timeout, double timeout,
                                                         const std::string& token = "");
    // A device ggml registered in this process (a GPU), by its name ("CUDA0", "Vulkan0").
    static std::shared_ptr<Device> open_local(const std::string& name);
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const std::string& kind() const { return kind_; }
    const std::string& name() const { return name_; }  // for messages: "RPC0 (127.0.0.1:50052)"
    ggml_backend_t backend() const { return backend_; }
    ggml_backend_buffer_type_t buffer_type() const { return buft_; }
    remote::Connection* connection() const { return conn_.get(); }
    std::vector<remote::Connection*> connections() const {
        return conn_ ? std::vector<remote::Connection*>{conn_.get()} : std::vector<remote::Connection*>{};
    }
    std::mutex& mutex() { return conn_ ? conn_->mutex() : mu_; }  // one user at a time
    DeviceInfo info();

private:
    Device() = default;
    std::string kind_, name_;
    ggml_backend_dev_t dev_ = nullptr;
    ggml_backend_t backend_ = nullptr;
    ggml_backend_buffer_type_t buft_ = nullptr;
    std::shared_ptr<remote::Connection> conn_;
    std::mutex mu_;
};

// ggml's registered devices (the CPU, GPUs it was built with) and the RPC
// servers this process is connected to.
std::vector<DeviceInfo> list_devices();

}  // namespace dg

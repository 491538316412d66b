#include "device.h"
#include "rpc_relay.h"

#include <cctype>

#include "errors.h"

namespace dg {

namespace {

const char* kind_of(ggml_backend_dev_t dev) {
    switch (ggml_backend_dev_type(dev)) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accel";
        default: return "other";
    }
}

bool same_name(const std::string& a, const char* b) {
    std::string x = a, y = b ? b : "";
    for (auto& ch : x) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    for (auto& ch : y) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return x == y;
}

}  // namespace

std::vector<std::shared_ptr<Device>> Device::open_rpc(const std::string& endpoint, double connect_timeout, double timeout,
                                                      const std::string& token) {
    std::shared_ptr<remote::Connection> conn = remote::Connection::open(endpoint, connect_timeout, timeout, token);
    std::vector<std::shared_ptr<Device>> devs;
    remote::guarded({conn.get()}, "opening its devices", [&] {
        const size_t n = ggml_backend_reg_dev_count(conn->reg());
        if (n < 1 || n > remote::Relay::kMaxDevices)  // (the relay refuses such a count before ggml sees it)
            fail<DeviceError>("RPC server ", endpoint, " reported ", n, " devices");
        for (size_t i = 0; i < n; ++i) {
            std::shared_ptr<Device> d(new Device);
            d->kind_ = "rpc";
            d->conn_ = conn;
            d->dev_ = ggml_backend_reg_dev_get(conn->reg(), i);
            d->name_ = cat(ggml_backend_dev_name(d->dev_), " (", endpoint, n > 1 ? cat(" device ", i) : std::string(), ")");
            d->backend_ = ggml_backend_dev_init(d->dev_, nullptr);
            d->buft_ = ggml_backend_dev_buffer_type(d->dev_);
            if (!d->backend_ || !d->buft_) fail<DeviceError>("RPC server ", endpoint, ": cannot open device ", i);
            const size_t align = ggml_backend_buft_get_alignment(d->buft_);
            if (align == 0 || (align & (align - 1)) != 0 || align > remote::Relay::kMaxAlignment)
                fail<DeviceError>("RPC server ", endpoint, " reported an alignment of ", align, " for device ", i);
            if (ggml_backend_buft_get_max_size(d->buft_) == 0)
                fail<DeviceError>("RPC server ", endpoint, " reported a maximum buffer size of 0 for device ", i);
            devs.push_back(std::move(d));
        }
    });
    return devs;
}

std::shared_ptr<Device> Device::open_local(const std::string& name) {
    std::string names;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
        names += cat(names.empty() ? "" : ", ", ggml_backend_dev_name(dev));
        if (!same_name(name, ggml_backend_dev_name(dev))) continue;
        std::shared_ptr<Device> d(new Device);
        d->kind_ = kind_of(dev);
        d->dev_ = dev;
        d->name_ = cat(ggml_backend_dev_name(dev), " (", ggml_backend_dev_description(dev), ")");
        d->backend_ = ggml_backend_dev_init(dev, nullptr);
        d->buft_ = ggml_backend_dev_buffer_type(dev);
        if (!d->backend_ || !d->buft_) fail<DeviceError>("device ", d->name_, " cannot be opened");
        return d;
    }
    fail<DeviceError>("no device named '", name, "' (this ggml has ", names.empty() ? std::string("no GPU devices") : names,
                      "; GPU devices need ggml built with GGML_CUDA=ON or GGML_VULKAN=ON: see third_party/ggml/README.md)");
}

Device::~Device() {
    // an RPC backend is a local object (freeing it sends nothing); buffers are freed by their owners
    if (backend_) ggml_backend_free(backend_);
}

DeviceInfo Device::info() {
    DeviceInfo r;
    r.kind = kind_;
    r.name = ggml_backend_dev_name(dev_);
    r.description = ggml_backend_dev_description(dev_);
    if (conn_) {
        r.endpoint = conn_->endpoint();
        if (conn_->dead()) return r;
        std::lock_guard<std::mutex> lock(mutex());
        remote::guarded(connections(), "reading its memory", [&] { ggml_backend_dev_memory(dev_, &r.memory_free, &r.memory_total); });
    } else {
        ggml_backend_dev_memory(dev_, &r.memory_free, &r.memory_total);
    }
    return r;
}

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        DeviceInfo r;
        r.kind = kind_of(dev);
        r.name = ggml_backend_dev_name(dev);
        r.description = ggml_backend_dev_description(dev);
        ggml_backend_dev_memory(dev, &r.memory_free, &r.memory_total);
        out.push_back(std::move(r));
    }
    for (const auto& conn : remote::open_connections()) {
        for (size_t i = 0; i < ggml_backend_reg_dev_count(conn->reg()); ++i) {
            ggml_backend_dev_t dev = ggml_backend_reg_dev_get(conn->reg(), i);
            DeviceInfo r;
            r.kind = "rpc";
            r.name = ggml_backend_dev_name(dev);
            r.endpoint = conn->endpoint();
            r.description = conn->dead() ? "lost" : "connected";
            if (!conn->dead()) {
                try {
                    std::lock_guard<std::mutex> lock(conn->mutex());
                    remote::guarded({conn.get()}, "reading its memory",
                                    [&] { ggml_backend_dev_memory(dev, &r.memory_free, &r.memory_total); });
                } catch (const DeviceError&) {
                    r.description = "lost";
                }
            }
            out.push_back(std::move(r));
        }
    }
    return out;
}

}  // namespace dg

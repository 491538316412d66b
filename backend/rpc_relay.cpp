#include "rpc_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>

#include "errors.h"
#include "ggml.h"
#include "remote.h"
#include "rpc_caps.h"
#ifdef DYNGRAPH_HAVE_RPC
#include "ggml-rpc.h"
#endif

namespace dg::remote {

// ---- SHA-256 and HMAC ------------------------------------------------------------------

namespace {

constexpr uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

std::string sha256(const std::string& data) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::string m = data;
    const uint64_t bits = uint64_t(data.size()) * 8;
    m.push_back(char(0x80));
    while (m.size() % 64 != 56) m.push_back('\0');
    for (int i = 7; i >= 0; --i) m.push_back(char((bits >> (8 * i)) & 0xff));
    for (size_t off = 0; off < m.size(); off += 64) {
        uint32_t w[64];
        for (int i = 0; i < 16; ++i) {
            const auto* p = reinterpret_cast<const unsigned char*>(m.data() + off + 4 * i);
            w[i] = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
        }
        for (int i = 16; i < 64; ++i) {
            uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            uint32_t ch = (e & f) ^ (~e & g);
            uint32_t t1 = hh + S1 + ch + K256[i] + w[i];
            uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
            uint32_t t2 = S0 + maj;
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
    std::string out(32, '\0');
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) out[4 * i + j] = char((h[i] >> (24 - 8 * j)) & 0xff);
    return out;
}

}  // namespace

std::string hmac_sha256(const std::string& key, const std::string& message) {
    std::string k = key.size() > 64 ? sha256(key) : key;
    k.resize(64, '\0');
    std::string ipad(64, '\0'), opad(64, '\0');
    for (int i = 0; i < 64; ++i) {
        ipad[i] = char(k[i] ^ 0x36);
        opad[i] = char(k[i] ^ 0x5c);
    }
    return sha256(opad + sha256(ipad + message));
}

// ---- the relay -------------------------------------------------------------------------

namespace {

// ggml's RPC commands (ggml-rpc.cpp, protocol 5) and the sizes of what they carry
enum Cmd : uint8_t {
    ALLOC_BUFFER = 0, GET_ALIGNMENT, GET_MAX_SIZE, BUFFER_GET_BASE, FREE_BUFFER, BUFFER_CLEAR, SET_TENSOR,
    SET_TENSOR_HASH, GET_TENSOR, COPY_TENSOR, GRAPH_COMPUTE, GET_DEVICE_MEMORY, INIT_TENSOR, GET_ALLOC_SIZE, HELLO,
    DEVICE_COUNT, GRAPH_RECOMPUTE, MEMSET_TENSOR, CMD_COUNT
};
const char* const kCmdNames[] = {"ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER",
                                 "BUFFER_CLEAR", "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR",
                                 "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO",
                                 "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"};
constexpr size_t kRpcTensor = 8 + 4 + 8 + 4 * GGML_MAX_DIMS * 2 + 4 + GGML_MAX_OP_PARAMS + 4 + 8 * GGML_MAX_SRC + 8 +
                              8 + 8 + GGML_MAX_NAME + 4;
static_assert(kRpcTensor % 8 == 0, "rpc_tensor's size");
constexpr size_t kHelloRsp = 4 + 24;
constexpr int64_t kNoAnswer = -1;
constexpr size_t kSmallRequest = 1 << 16;  // requests read whole (the others are streamed)

struct Bad {
    std::string why;
};
struct Closed {};

uint64_t u64_at(const std::vector<uint8_t>& b, size_t off) {
    uint64_t v = 0;
    if (off + 8 <= b.size()) std::memcpy(&v, b.data() + off, 8);
    return v;
}
uint32_t u32_at(const std::vector<uint8_t>& b, size_t off) {
    uint32_t v = 0;
    if (off + 4 <= b.size()) std::memcpy(&v, b.data() + off, 4);
    return v;
}

}  // namespace

struct Relay::Session {
    Relay& relay;
    int client, server;
    std::map<uint64_t, uint64_t> buffers;  // remote buffer -> its size
    bool caps = false;     // the server answers capability queries (rpc_caps.h)
    bool closed = false;   // the sockets are closed (under `exchange`)
    std::mutex exchange;   // held from a request's first byte to its answer's last (and by a query)

    Session(Relay& r, int c, int s) : relay(r), client(c), server(s) {}

    // Wait until `fd` can be read; Closed when the other side hung up or the relay stops.
    void wait(int fd) {
        const int other = fd == client ? server : client;
        for (;;) {
            if (relay.stop_.load()) throw Closed{};
            pollfd p[3] = {{fd, POLLIN, 0}, {other, POLLRDHUP, 0}, {relay.wake_[0], POLLIN, 0}};
            int r = poll(p, 3, 1000);
            if (r < 0 && errno != EINTR) throw Closed{};
            if (r <= 0) continue;
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) return;
            if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) throw Closed{};
        }
    }
    void read_exact(int fd, void* dst, size_t n) {
        auto* p = static_cast<char*>(dst);
        while (n) {
            wait(fd);
            ssize_t r = recv(fd, p, n, 0);
            if (r == 0) throw Closed{};
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                throw Closed{};
            }
            p += r;
            n -= size_t(r);
        }
    }
    void write_all(int fd, const void* src, size_t n) {
        auto* p = static_cast<const char*>(src);
        while (n) {
            ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
            if (r < 0) {
                if (errno == EINTR) continue;
                throw Closed{};
            }
            p += r;
            n -= size_t(r);
        }
    }
    void stream(int from, int to, uint64_t n) {
        std::vector<char> buf(size_t(std::min<uint64_t>(n, 1 << 20)));
        while (n) {
            const size_t k = size_t(std::min<uint64_t>(n, buf.size()));
            wait(from);
            ssize_t r = recv(from, buf.data(), k, 0);
            if (r == 0) throw Closed{};
            if (r < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                throw Closed{};
            }
            write_all(to, buf.data(), size_t(r));
            n -= uint64_t(r);
        }
    }

    void authenticate() {
        write_all(server, kAuthHello, 8);
        std::string nonce(kAuthNonce, '\0');
        try {
            read_exact(server, nonce.data(), nonce.size());
        } catch (const Closed&) {
            throw Bad{"closed the connection at the token's challenge (does it run with --token, and is this "
                      "dyngraph's rpc-server?)"};
        }
        const std::string mac = hmac_sha256(relay.token_, std::string(kAuthContext) + nonce);
        write_all(server, mac.data(), mac.size());
        char ok[4];
        try {
            read_exact(server, ok, 4);
        } catch (const Closed&) {
            throw Bad{"refused the token (the server's --token / DYNGRAPH_RPC_TOKEN differs)"};
        }
        if (std::memcmp(ok, kAuthOk, 4) != 0) throw Bad{"answered the token with something else than its acceptance"};
    }

    // The token's exchange, then whether the server answers capability queries: a server that does not
    // (ggml's own) closes the connection at caps::kHello, and is connected to again.
    void negotiate() {
        if (!relay.token_.empty()) authenticate();
        write_all(server, caps::kHello, 8);
        char ok[4];
        try {
            read_exact(server, ok, 4);
        } catch (const Closed&) {
            if (relay.stop_.load()) throw;
            std::string why;
            const int fresh = relay.connect_upstream(why);
            if (fresh < 0) throw Bad{cat("could not be reached again (", why, ") after it closed the connection at "
                                         "dyngraph's capability query")};
            relay.replace_fd(server, fresh);
            server = fresh;
            if (!relay.token_.empty()) authenticate();
            return;
        }
        if (std::memcmp(ok, caps::kOk, 4) != 0) throw Bad{"answered dyngraph's capability query with something else"};
        caps = true;
    }

    // Wait until `fd` is ready for `events`, until `deadline`; Bad when it passes or the socket fails.
    void wait_until(int fd, short events, std::chrono::steady_clock::time_point deadline, double timeout) {
        for (;;) {
            if (relay.stop_.load()) throw Closed{};
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) throw Bad{cat("did not answer within ", timeout, " s while asked which ops it computes")};
            pollfd p[2] = {{fd, events, 0}, {relay.wake_[0], POLLIN, 0}};
            int r = poll(p, 2, int(std::min<int64_t>(left.count(), 1000)));
            if (r < 0 && errno != EINTR) throw Closed{};
            if (r > 0 && (p[0].revents & (events | POLLHUP | POLLERR | POLLNVAL))) return;
        }
    }

    // A capability query (rpc_caps.h), between two of ggml's requests: the answer, one byte per node.
    std::string ask(const std::string& query, uint32_t count, double timeout) {
        std::lock_guard<std::mutex> lock(exchange);
        if (closed) throw Closed{};
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(int64_t(std::min(timeout, 86400.0) * 1000));
        std::string msg(1, char(caps::kSupportsCmd));
        const uint64_t size = query.size();
        msg.append(reinterpret_cast<const char*>(&size), 8);
        msg += query;
        for (size_t at = 0; at < msg.size();) {
            wait_until(server, POLLOUT, deadline, timeout);
            ssize_t r = send(server, msg.data() + at, msg.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (r < 0 && errno != EINTR && errno != EAGAIN) throw Closed{};
            if (r > 0) at += size_t(r);
        }
        std::string got(8 + size_t(count), '\0');
        for (size_t at = 0; at < got.size();) {
            wait_until(server, POLLIN, deadline, timeout);
            ssize_t r = recv(server, got.data() + at, (at < 8 ? 8 : got.size()) - at, MSG_DONTWAIT);
            if (r == 0) throw Closed{};
            if (r < 0 && errno != EINTR && errno != EAGAIN) throw Closed{};
            if (r > 0) at += size_t(r);
            if (at == 8) {
                uint64_t n = 0;
                std::memcpy(&n, got.data(), 8);
                if (n != count) throw Bad{cat("answered a capability query of ", count, " nodes with ", n, " bytes")};
            }
        }
        for (size_t i = 8; i < got.size(); ++i)
            if (uint8_t(got[i]) > 1) throw Bad{cat("answered a capability query with ", int(uint8_t(got[i])), " (0 or 1)")};
        return got.substr(8);
    }

    void run() {
        for (;;) {
            uint8_t cmd;
            uint64_t size;
            try {
                read_exact(client, &cmd, 1);
            } catch (const Closed&) {
                return;  // ggml closed the connection (or the relay stops)
            }
            std::lock_guard<std::mutex> lock(exchange);
            read_exact(client, &size, 8);
            if (cmd >= CMD_COUNT) throw Bad{cat("(relay) this process sent an unknown command ", int(cmd))};
            std::vector<uint8_t> req;
            int64_t expected = kNoAnswer;
            uint64_t got = 0;
            try {
                write_all(server, &cmd, 1);
                write_all(server, &size, 8);
                if (size <= kSmallRequest) {
                    req.resize(size_t(size));
                    read_exact(client, req.data(), req.size());
                    write_all(server, req.data(), req.size());
                } else {
                    stream(client, server, size);
                }
                expected = answer_size(Cmd(cmd), req);
                if (expected == kNoAnswer) continue;
                read_exact(server, &got, 8);
            } catch (const Closed&) {
                if (cmd == HELLO && relay.token_.empty())
                    throw Bad{"closed the connection at HELLO (a server started with --token does so: give the "
                              "engine its token, token= or DYNGRAPH_RPC_TOKEN)"};
                throw;
            }
            const char* name = kCmdNames[cmd];
            if (got != uint64_t(expected))
                throw Bad{cat("answered ", name, " with ", got, " bytes, not ", expected)};
            if (cmd == GET_TENSOR) {
                write_all(client, &got, 8);
                stream(server, client, got);
                continue;
            }
            std::vector<uint8_t> rsp(static_cast<size_t>(got));
            read_exact(server, rsp.data(), rsp.size());
            check(Cmd(cmd), req, rsp);
            write_all(client, &got, 8);
            write_all(client, rsp.data(), rsp.size());
        }
    }

    int64_t answer_size(Cmd cmd, const std::vector<uint8_t>& req) {
        switch (cmd) {
            case HELLO: return kHelloRsp;
            case DEVICE_COUNT: return 4;
            case ALLOC_BUFFER: return 16;
            case GET_ALIGNMENT: case GET_MAX_SIZE: case BUFFER_GET_BASE: case GET_ALLOC_SIZE: return 8;
            case FREE_BUFFER: case BUFFER_CLEAR: case INIT_TENSOR: case MEMSET_TENSOR: return 0;
            case SET_TENSOR_HASH: case COPY_TENSOR: return 1;
            case GET_DEVICE_MEMORY: return 16;
            case GET_TENSOR: {
                if (req.size() != kRpcTensor + 16) throw Bad{"(relay) a GET_TENSOR request of an unexpected size"};
                const uint64_t n = u64_at(req, kRpcTensor + 8);
                if (n > kMaxAllocSize) throw Bad{cat("(relay) a GET_TENSOR of ", n, " bytes")};
                return int64_t(n);
            }
            default: return kNoAnswer;  // SET_TENSOR, GRAPH_COMPUTE, GRAPH_RECOMPUTE
        }
    }

    void device_asked(const std::vector<uint8_t>& req, const char* name) {
        const uint32_t d = u32_at(req, 0), n = relay.devices_.load();
        if (d >= (n ? n : kMaxDevices)) throw Bad{cat("(relay) ", name, " for device ", d, " of ", n)};
    }

    void check(Cmd cmd, const std::vector<uint8_t>& req, std::vector<uint8_t>& rsp) {
        switch (cmd) {
            case HELLO:
#ifdef DYNGRAPH_HAVE_RPC
                if (rsp[0] != RPC_PROTO_MAJOR_VERSION || rsp[1] > RPC_PROTO_MINOR_VERSION)
                    throw Bad{cat("speaks RPC protocol ", int(rsp[0]), ".", int(rsp[1]), ", not ",
                                  RPC_PROTO_MAJOR_VERSION, ".", RPC_PROTO_MINOR_VERSION)};
#endif
                std::fill(rsp.begin() + 4, rsp.end(), 0);  // TCP only: no transport upgrade through the relay
                return;
            case DEVICE_COUNT: {
                const uint32_t n = u32_at(rsp, 0);
                if (n < 1 || n > kMaxDevices) throw Bad{cat("reported ", n, " devices (at most ", kMaxDevices, ")")};
                uint32_t before = 0;
                if (!relay.devices_.compare_exchange_strong(before, n) && before != n)
                    throw Bad{cat("reported ", n, " devices after ", before)};
                return;
            }
            case GET_ALIGNMENT: {
                device_asked(req, "GET_ALIGNMENT");
                const uint64_t a = u64_at(rsp, 0);
                if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment)
                    throw Bad{cat("reported an alignment of ", a, " (a power of two up to ", kMaxAlignment, ")")};
                return;
            }
            case GET_MAX_SIZE:
                device_asked(req, "GET_MAX_SIZE");
                if (u64_at(rsp, 0) == 0) throw Bad{"reported a maximum buffer size of 0"};
                return;
            case ALLOC_BUFFER: {
                device_asked(req, "ALLOC_BUFFER");
                const uint64_t asked = u64_at(req, 4), ptr = u64_at(rsp, 0), got = u64_at(rsp, 8);
                if (ptr == 0) return;  // the server could not allocate: ggml says so
                if (got < asked || got - asked > asked + (uint64_t(1) << 20))
                    throw Bad{cat("gave a buffer of ", got, " bytes for ", asked)};
                if (buffers.count(ptr)) throw Bad{cat("gave buffer ", ptr, " twice")};
                buffers[ptr] = got;
                return;
            }
            case BUFFER_GET_BASE: {
                const uint64_t buf = u64_at(req, 0), base = u64_at(rsp, 0);
                auto it = buffers.find(buf);
                const uint64_t n = it == buffers.end() ? 0 : it->second;
                if (base == 0 || base + n < base) throw Bad{cat("gave a base address of ", base, " for a buffer of ", n, " bytes")};
                return;
            }
            case FREE_BUFFER:
                buffers.erase(u64_at(req, 0));
                return;
            case GET_ALLOC_SIZE: {
                device_asked(req, "GET_ALLOC_SIZE");
                const uint64_t n = u64_at(rsp, 0);
                if (n > kMaxAllocSize) throw Bad{cat("reported an allocation size of ", n, " bytes")};
                return;
            }
            case GET_DEVICE_MEMORY: {
                device_asked(req, "GET_DEVICE_MEMORY");
                const uint64_t free = u64_at(rsp, 0), total = u64_at(rsp, 8);
                if (free > total) throw Bad{cat("reported ", free, " bytes free of ", total)};
                return;
            }
            case SET_TENSOR_HASH: case COPY_TENSOR:
                if (rsp[0] > 1) throw Bad{cat("answered ", kCmdNames[cmd], " with ", int(rsp[0]), " (0 or 1)")};
                return;
            default:
                return;
        }
    }
};

Relay::Relay(std::string endpoint, const sockaddr_in& upstream, std::string token, double connect_timeout)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), upstream_(upstream), connect_timeout_(connect_timeout) {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
        fail<DeviceError>("RPC server ", endpoint_, ": cannot open this process's relay: ", std::strerror(errno));
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr_.sin_family = AF_INET;
    addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr_.sin_port = 0;
    socklen_t len = sizeof(addr_);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)) != 0 ||
        listen(listen_fd_, 8) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr_), &len) != 0) {
        const std::string why = std::strerror(errno);
        if (listen_fd_ >= 0) close(listen_fd_);
        close(wake_[0]);
        close(wake_[1]);
        fail<DeviceError>("RPC server ", endpoint_, ": cannot open this process's relay on 127.0.0.1: ", why);
    }
    acceptor_ = std::thread([this] { accept_loop(); });
}

Relay::~Relay() {
    stop_ = true;
    if (write(wake_[1], "x", 1) < 0) {
    }  // (the threads see stop_ within a second anyway)
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> sessions;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (int fd : live_fds_) shutdown(fd, SHUT_RDWR);
        sessions.swap(sessions_);
    }
    for (auto& t : sessions)
        if (t.joinable()) t.join();
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
}

std::string Relay::error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
}

void Relay::set_error(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = why;
}

bool Relay::own_socket(const sockaddr_in& peer) const {
    // a socket of this process connected to the relay, whose local address is the accepted peer
    for (int fd : sockets_to(addr_)) {
        sockaddr_in local{};
        socklen_t len = sizeof(local);
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 && local.sin_port == peer.sin_port &&
            local.sin_addr.s_addr == peer.sin_addr.s_addr)
            return true;
    }
    return false;
}

void Relay::accept_loop() {
    while (!stop_.load()) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
        if (poll(p, 2, 1000) <= 0 || !(p[0].revents & POLLIN)) continue;
        sockaddr_in peer{};
        socklen_t len = sizeof(peer);
        int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
        if (fd < 0) continue;
        std::lock_guard<std::mutex> lock(mu_);
        if (!own_socket(peer) || sessions_.size() >= 64) {  // another process's connection: not relayed
            close(fd);
            continue;
        }
        live_fds_.push_back(fd);
        sessions_.emplace_back([this, fd] { serve(fd); });
    }
}

int Relay::connect_upstream(std::string& why) {
    const int server = connect_within(upstream_, connect_timeout_, why);
    if (server < 0) return -1;
    std::lock_guard<std::mutex> lock(mu_);
    live_fds_.push_back(server);
    return server;
}

void Relay::replace_fd(int old_fd, int new_fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (old_fd == new_fd) return;
    shutdown(old_fd, SHUT_RDWR);
    close(old_fd);
    live_fds_.erase(std::remove(live_fds_.begin(), live_fds_.end(), old_fd), live_fds_.end());
}

void Relay::serve(int client) {
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string why;
    const int server = connect_upstream(why);
    std::shared_ptr<Session> s;
    if (server < 0) {
        set_error(cat("could not be reached (", why, ")"));
    } else {
        s = std::make_shared<Session>(*this, client, server);
        try {
            s->negotiate();
            {
                std::lock_guard<std::mutex> lock(mu_);
                live_.push_back(s);
            }
            s->run();
        } catch (const Bad& b) {
            set_error(b.why);
        } catch (const Closed&) {
        } catch (const std::exception& e) {
            set_error(cat("(relay) ", e.what()));
        }
    }
    std::unique_lock<std::mutex> ex;
    if (s) ex = std::unique_lock<std::mutex>(s->exchange);  // (a query in flight ends first)
    std::lock_guard<std::mutex> lock(mu_);
    if (s) {
        s->closed = true;
        live_.erase(std::remove(live_.begin(), live_.end(), s), live_.end());
    }
    for (int fd : {client, s ? s->server : -1}) {
        if (fd < 0) continue;
        shutdown(fd, SHUT_RDWR);
        close(fd);
        live_fds_.erase(std::remove(live_fds_.begin(), live_fds_.end(), fd), live_fds_.end());
    }
}

std::optional<std::string> Relay::ask_supports(const std::string& query, uint32_t count, double timeout) {
    std::shared_ptr<Session> s;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!live_.empty()) s = live_.back();
    }
    // (no connection: the server closed it, which ggml's next call reports as such)
    if (!s || !s->caps) return std::nullopt;
    try {
        return s->ask(query, count, timeout);
    } catch (const Bad& b) {
        set_error(b.why);
    } catch (const Closed&) {
        set_error("closed the connection at a capability query");
    }
    {
        std::lock_guard<std::mutex> lock(s->exchange);  // ggml's next call on this connection fails as well
        if (!s->closed) {
            shutdown(s->client, SHUT_RDWR);
            shutdown(s->server, SHUT_RDWR);
        }
    }
    throw DeviceError(cat("RPC server ", endpoint_, " ", error()));
}

}  // namespace dg::remote

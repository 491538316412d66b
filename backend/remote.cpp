#include "remote.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "ggml.h"
#include "rpc_caps.h"
#include "rpc_relay.h"
#ifdef DYNGRAPH_HAVE_RPC
#include "ggml-rpc.h"
#endif

namespace dg::remote {

namespace {

thread_local int t_guards = 0;  // Guards this thread holds
ggml_abort_callback_t g_previous = nullptr;

void on_abort(const char* message) {
    if (t_guards > 0) throw Lost{message ? message : "ggml abort"};
    if (g_previous) {
        g_previous(message);
        return;
    }
    std::fprintf(stderr, "%s\n", message ? message : "ggml abort");
}

// ---- sockets ------------------------------------------------------------------

bool same_peer(const sockaddr_in& a, const sockaddr_in& b) {
    return a.sin_family == b.sin_family && a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
}

}  // namespace

int connect_within(const sockaddr_in& peer, double timeout, std::string& why) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        why = std::strerror(errno);
        return -1;
    }
    if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0) {
        if (errno != EINPROGRESS) {
            why = std::strerror(errno);
        } else {
            pollfd p{fd, POLLOUT, 0};
            const int r = poll(&p, 1, int(std::ceil(timeout * 1000)));
            if (r == 0) {
                why = cat("no answer within ", timeout, " s");
            } else if (r < 0) {
                why = std::strerror(errno);
            } else {
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0) why = std::strerror(err);
            }
        }
    }
    if (!why.empty()) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

std::set<int> sockets_to(const sockaddr_in& peer) {
    std::set<int> fds;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return fds;
    const int own = dirfd(d);
    while (dirent* e = readdir(d)) {
        char* end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != 0 || fd == own) continue;
        sockaddr_in a{};
        socklen_t len = sizeof(a);
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&a), &len) == 0 && len == sizeof(a) && same_peer(a, peer))
            fds.insert(int(fd));
    }
    closedir(d);
    return fds;
}

namespace {

void parse_endpoint(const std::string& endpoint, std::string& host, int& port) {
    const size_t colon = endpoint.rfind(':');
    if (endpoint.size() > 255 || colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size())
        fail<DeviceError>("RPC endpoint '", endpoint, "' is not HOST:PORT");
    host = endpoint.substr(0, colon);
    const std::string p = endpoint.substr(colon + 1);
    if (p.size() > 5 || !std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        fail<DeviceError>("RPC endpoint '", endpoint, "': port '", p, "' is not a number");
    port = std::stoi(p);
    if (port < 1 || port > 65535) fail<DeviceError>("RPC endpoint '", endpoint, "': port ", port, " is outside [1, 65535]");
    for (char ch : host)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'))
            fail<DeviceError>("RPC endpoint '", endpoint, "': host '", host, "' is not an IPv4 address or a host name");
}

sockaddr_in resolve(const std::string& endpoint, const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;  // ggml's client connects over IPv4 (gethostbyname)
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res) fail<DeviceError>("RPC endpoint '", endpoint, "': cannot resolve host '", host, "': ", gai_strerror(rc));
    sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
    freeaddrinfo(res);
    a.sin_port = htons(uint16_t(port));
    return a;
}

// A TCP connect of at most `timeout` seconds; "" when it succeeds, else why not.
std::string probe(const sockaddr_in& peer, double timeout) {
    std::string why;
    const int fd = connect_within(peer, timeout, why);
    if (fd >= 0) close(fd);
    return why;
}

bool tcp_info_of(int fd, tcp_info& info) {
    if (fd < 0) return false;
    socklen_t len = sizeof(info);
    std::memset(&info, 0, sizeof(info));
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0;
}

// ---- watchdog -------------------------------------------------------------------

struct Watch {
    std::chrono::steady_clock::time_point deadline;
    Guard* guard;
    std::vector<sockaddr_in> peers;
};

class Watchdog {
public:
    static Watchdog& get() {
        static Watchdog* w = new Watchdog;  // never destroyed: its thread runs until the process ends
        return *w;
    }
    std::list<Watch>::iterator add(Watch w) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!started_) {
            std::thread([this] { run(); }).detach();
            started_ = true;
        }
        watches_.push_front(std::move(w));
        cv_.notify_one();
        return watches_.begin();
    }
    void remove(std::list<Watch>::iterator it) {
        std::lock_guard<std::mutex> lock(mu_);
        watches_.erase(it);
    }

private:
    void run() {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            auto now = std::chrono::steady_clock::now();
            auto next = now + std::chrono::hours(1);
            for (auto it = watches_.begin(); it != watches_.end();) {
                if (it->deadline <= now) {
                    // the guarded call is stuck: end its sockets' waits (shutdown, not close: the fds stay
                    // valid for ggml, whose send/recv now fail)
                    it->guard->timed_out_ = true;
                    for (const sockaddr_in& p : it->peers)
                        for (int fd : sockets_to(p)) shutdown(fd, SHUT_RDWR);
                    it->deadline = now + std::chrono::hours(24 * 365);  // fired; removed by its Guard
                } else {
                    next = std::min(next, it->deadline);
                }
                ++it;
            }
            cv_.wait_until(lock, next);
        }
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::list<Watch> watches_;
    bool started_ = false;
};

thread_local std::vector<std::list<Watch>::iterator> t_watches;

// ---- registry -------------------------------------------------------------------

std::mutex g_registry_mu;
std::map<std::string, std::weak_ptr<Connection>> g_registry;
std::mutex g_dead_mu;  // (a connection is lost while open() holds g_registry_mu)
std::map<std::string, int> g_dead_count;  // per endpoint: connections lost (each took an alias with it)

}  // namespace

void install_abort_handler() {
    static std::once_flag once;
    std::call_once(once, [] { g_previous = ggml_set_abort_callback(on_abort); });
}

double max_timeout(const std::vector<Connection*>& conns) {
    double t = 0;
    for (const Connection* c : conns) t = std::max(t, c->timeout());
    return t;
}

Guard::Guard(std::vector<Connection*> conns, double timeout) : conns_(std::move(conns)) {
    Watch w;
    w.deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout));
    w.guard = this;
    for (Connection* c : conns_) w.peers.push_back(c->peer());
    t_watches.push_back(Watchdog::get().add(std::move(w)));
    ++t_guards;
}

Guard::~Guard() {
    --t_guards;
    Watchdog::get().remove(t_watches.back());
    t_watches.pop_back();
}

void lost(const Guard& g, const Lost& e, const char* doing) {
    // ggml_abort's message starts with the file: ggml-rpc.cpp when the RPC client lost its server
    if (!g.timed_out() && e.message.find("ggml-rpc") == std::string::npos)
        fail<GgmlAbort>("ggml stopped while ", doing, ": ", e.message);
    std::vector<Connection*> failed;
    std::string reason;
    if (g.timed_out()) {
        failed = g.connections();
        reason = cat("did not answer within ", max_timeout(failed), " s");
    } else {
        for (Connection* c : g.connections())
            if (!c->relay_error().empty()) failed.push_back(c);
        if (!failed.empty()) {  // the relay refused an answer (or the token): say what was wrong
            reason = failed.front()->relay_error();
        } else {
            for (Connection* c : g.connections())
                if (c->socket_broken()) failed.push_back(c);
            reason = "closed the connection (the server stopped or crashed)";
        }
        if (failed.empty()) {  // a malformed answer: nothing on these sockets can be trusted
            failed = g.connections();
            reason = "sent a malformed answer";
        }
    }
    std::string names;
    for (Connection* c : failed) {
        names += (names.empty() ? "" : ", ") + c->endpoint();
        c->mark_dead(cat(reason, " while ", doing));
    }
    fail<DeviceError>("RPC server ", names, " ", reason, " while ", doing,
                      "; what ran on it cannot be used again (ggml: ", e.message, ")");
}

std::shared_ptr<Connection> Connection::open(const std::string& endpoint, double connect_timeout, double timeout,
                                             const std::string& token) {
    if (!(connect_timeout > 0 && connect_timeout <= 3600) || !(timeout > 0 && timeout <= 86400))
        fail<DeviceError>("RPC endpoint '", endpoint, "': timeouts must lie in (0, 3600] s (connect) and (0, 86400] s (calls)");
    std::string host;
    int port = 0;
    parse_endpoint(endpoint, host, port);
#ifndef DYNGRAPH_HAVE_RPC
    fail<DeviceError>("RPC endpoint '", endpoint, "': this build of ggml has no RPC backend (build ggml with GGML_RPC=ON, ",
                      "as the default source build does)");
#else
    install_abort_handler();
    const sockaddr_in peer = resolve(endpoint, host, port);
    if (token.size() > 4096) fail<DeviceError>("RPC endpoint '", endpoint, "': the token is longer than 4096 bytes");
    std::lock_guard<std::mutex> lock(g_registry_mu);
    const std::string key = token.empty() ? endpoint : cat(endpoint, " (token ", hmac_sha256(token, endpoint).substr(0, 8), ")");
    auto it = g_registry.find(key);
    if (it != g_registry.end())
        if (auto c = it->second.lock(); c && !c->dead()) return c;
    std::string why = probe(peer, connect_timeout);
    if (!why.empty())
        fail<DeviceError>("cannot reach RPC server ", endpoint, ": ", why, " (is `dyngraph rpc-server --host ", host,
                          " --port ", port, "` running there?)");
    std::shared_ptr<Connection> c(new Connection);
    c->endpoint_ = endpoint;
    // ggml connects to this process's relay, which connects to the server (and checks its answers)
    c->relay_ = std::make_unique<Relay>(endpoint, peer, token, connect_timeout);
    // a new spelling of the relay's endpoint per connection: ggml caches what a server said per endpoint
    // string for the process's life, and a later relay may get the same port
    {
        std::lock_guard<std::mutex> dead_lock(g_dead_mu);
        static std::map<int, int> uses;
        c->alias_ = cat("127.0.0.1:", std::string(size_t(uses[c->relay_->port()]++), '0'), c->relay_->port());
    }
    c->peer_ = c->relay_->address();
    c->timeout_ = timeout;
    guarded({c.get()}, "connecting", [&] {
        // connects, exchanges versions, asks for the device count (ggml caches the result per alias)
        c->reg_ = ggml_backend_rpc_add_server(c->alias_.c_str());
        if (!c->reg_ && !c->relay_error().empty())
            fail<DeviceError>("RPC server ", endpoint, " ", c->relay_error());
        if (!c->reg_ || ggml_backend_reg_dev_count(c->reg_) == 0)
            fail<DeviceError>("RPC server ", endpoint, " answered but is not a ggml RPC server of protocol ",
                              RPC_PROTO_MAJOR_VERSION, ".", RPC_PROTO_MINOR_VERSION, " with a device");
        ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(ggml_backend_reg_dev_get(c->reg_, 0));
        if (!buft) fail<DeviceError>("RPC server ", endpoint, ": no buffer type");
        // a small buffer held for the connection's life: ggml's client keeps one socket per endpoint only while
        // something holds it, and would otherwise connect again for every call
        std::set<int> before = sockets_to(c->peer_);
        c->anchor_ = ggml_backend_buft_alloc_buffer(buft, 64);
        if (!c->anchor_) fail<DeviceError>("RPC server ", endpoint, " could not allocate a buffer");
        for (int fd : sockets_to(c->peer_))
            if (!before.count(fd)) c->fd_ = fd;
        if (c->fd_ < 0 && !before.empty()) c->fd_ = *before.rbegin();
    });
    g_registry[key] = c;
    return c;
#endif
}

Connection::~Connection() {
    if (!anchor_ || dead()) return;  // a dead connection's objects are leaked (freeing sends a message)
    try {
        guarded({this}, "closing the connection", [&] { ggml_backend_buffer_free(anchor_); });
    } catch (...) {
    }
}

std::string Connection::relay_error() const { return relay_ ? relay_->error() : std::string(); }

void Connection::mark_dead(const std::string& why) {
    std::lock_guard<std::mutex> lock(g_dead_mu);
    if (dead_.load()) return;
    why_ = why;
    dead_ = true;
    ++g_dead_count[endpoint_];
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);  // nothing more goes over it
}

void Connection::check_alive(const char* doing) const {
    if (!dead()) return;
    std::string why;
    {
        std::lock_guard<std::mutex> lock(g_dead_mu);
        why = why_;
    }
    fail<DeviceError>("RPC server ", endpoint_, " was lost earlier (it ", why, "): cannot use it for ", doing,
                          "; open a new Engine once the server runs again");
}

bool Connection::socket_broken() const {
    if (fd_ < 0) return true;
    tcp_info info;
    if (!tcp_info_of(fd_, info) || info.tcpi_state != 1 /* TCP_ESTABLISHED */) return true;
    pollfd p{fd_, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

uint64_t Connection::bytes_sent() const {
    tcp_info info;
    return tcp_info_of(fd_, info) ? info.tcpi_bytes_acked : 0;
}

uint64_t Connection::bytes_received() const {
    tcp_info info;
    return tcp_info_of(fd_, info) ? info.tcpi_bytes_received : 0;
}

std::vector<char> Connection::supports(uint32_t device, const std::vector<const ggml_tensor*>& nodes) {
    std::vector<char> out(nodes.size(), 1);
    std::vector<std::string> keys(nodes.size()), asked;  // asked: each new signature once
    std::map<std::string, size_t> new_keys;               // signature -> its place in `asked`
    {
        std::lock_guard<std::mutex> lock(caps_mu_);
        for (size_t i = 0; i < nodes.size(); ++i) {
            keys[i].append(reinterpret_cast<const char*>(&device), 4);
            caps::encode_node(nodes[i], keys[i]);
            auto it = caps_.find(keys[i]);
            if (it != caps_.end()) out[i] = it->second;
            else if (new_keys.emplace(keys[i], asked.size()).second) asked.push_back(keys[i].substr(4));
        }
    }
    std::string answers;
    for (size_t from = 0; from < asked.size(); from += caps::kMaxNodes) {
        const size_t to = std::min(asked.size(), from + caps::kMaxNodes);
        const std::vector<std::string> part(asked.begin() + from, asked.begin() + to);
        check_alive("asking which ops it computes");
        std::optional<std::string> got;
        try {
            got = relay_->ask_supports(caps::encode_query(device, part), uint32_t(part.size()), timeout_);
        } catch (const DeviceError&) {
            mark_dead(relay_error().empty() ? "failed a capability query" : relay_error());
            throw;
        }
        if (!got) return out;  // (not dyngraph's server: ggml's "yes")
        answers += *got;
    }
    if (asked.empty()) return out;
    std::lock_guard<std::mutex> lock(caps_mu_);
    if (caps_.size() > 65536) caps_.clear();
    for (const auto& [key, at] : new_keys) caps_[key] = answers[at];
    for (size_t i = 0; i < nodes.size(); ++i)
        if (auto it = new_keys.find(keys[i]); it != new_keys.end()) out[i] = answers[it->second];
    return out;
}

std::vector<char> backend_supports(ggml_backend_t be, const std::vector<const ggml_tensor*>& nodes) {
    // (an RPC device's own reg is ggml's RPC reg, not its server's: found among the connections' devices)
    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    if (dev && ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_CPU)
        for (const std::shared_ptr<Connection>& c : open_connections()) {
            if (!c->reg()) continue;
            for (size_t i = 0; i < ggml_backend_reg_dev_count(c->reg()); ++i)
                if (ggml_backend_reg_dev_get(c->reg(), i) == dev) return c->supports(uint32_t(i), nodes);
        }
    std::vector<char> out(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) out[i] = ggml_backend_supports_op(be, nodes[i]) ? 1 : 0;
    return out;
}

std::vector<std::shared_ptr<Connection>> open_connections() {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    std::vector<std::shared_ptr<Connection>> r;
    for (auto& [k, w] : g_registry)
        if (auto c = w.lock()) r.push_back(c);
    return r;
}

}  // namespace dg::remote

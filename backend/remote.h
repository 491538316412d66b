// Remote devices: a connection to a ggml RPC server, and the guard every call
// into ggml's RPC client runs under.
//
// ggml's RPC client has no timeouts and, when a send or receive fails, calls
// GGML_ABORT ("Remote RPC server crashed or returned malformed response"),
// which ends the process. dyngraph turns that into a typed error:
//
// - Only inside a Guard, and only in the thread that holds it: the abort
//   callback dyngraph installs (ggml_set_abort_callback) throws remote::Lost
//   when the calling thread holds a Guard; any other abort keeps ggml's
//   behaviour (message, abort()). Every frame between our call and the abort
//   is C++ with RAII locks (ggml-rpc.cpp, ggml-backend.cpp) or C compiled with
//   unwind tables (ggml_abort itself), so the exception unwinds cleanly.
// - What ggml was doing when it threw is left half-done: a connection that
//   lost a call is marked dead and never used again (its ggml objects are
//   leaked rather than freed: freeing sends a message too), and the compiled
//   partition that was running is refused from then on. Other connections,
//   engines and partitions keep working.
// - Hangs are bounded: before ggml connects, the endpoint is probed with a
//   connect of bounded time; while a Guard is held, a watchdog thread shuts
//   the guarded sockets down (shutdown(2): the blocked send/recv returns, the
//   call fails as above) when the Guard's deadline passes.
// - ggml's client caches its socket per endpoint string and connects again
//   only when no object holds the old one. A dead connection's objects are
//   leaked, so a new connection to the same server uses another spelling of
//   the endpoint (the port with leading zeros: ggml reads it with std::stoi).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <set>

#include "errors.h"
#include "ggml-backend.h"

namespace dg {

// A remote device failed (unreachable, died, timed out). Raised as dyngraph.DeviceError.
struct DeviceError : ExecutionError {
    using ExecutionError::ExecutionError;
};

namespace remote {

// Thrown by the abort callback inside a Guard (never escapes dyngraph: callers turn it into DeviceError).
struct Lost {
    std::string message;
};

}  // namespace remote

// ggml aborted inside a guarded call for a reason of its own (not a lost
// connection): what it was doing is half-done, so what it was doing it for is
// not used again. Raised as dyngraph.ExecutionError.
struct GgmlAbort : ExecutionError {
    using ExecutionError::ExecutionError;
};

namespace remote {

class Relay;

// A blocking TCP socket (TCP_NODELAY) connected to `peer` within `timeout` seconds, or -1 and `why`.
int connect_within(const sockaddr_in& peer, double timeout, std::string& why);

// File descriptors of this process's TCP sockets connected to `peer`.
std::set<int> sockets_to(const sockaddr_in& peer);

class Connection {
public:
    // Connect to `endpoint` ("host:port"), probing first (connect_timeout
    // seconds); `timeout` bounds each guarded call. DeviceError when the
    // server cannot be reached or is not a ggml RPC server. ggml's client
    // reaches the server through a Relay of this process (rpc_relay.h), which
    // checks every answer and, with a `token`, authenticates first.
    static std::shared_ptr<Connection> open(const std::string& endpoint, double connect_timeout, double timeout,
                                            const std::string& token = "");
    ~Connection();

    const std::string& endpoint() const { return endpoint_; }  // as the user wrote it
    const std::string& alias() const { return alias_; }        // as ggml knows it
    ggml_backend_reg_t reg() const { return reg_; }
    double timeout() const { return timeout_; }
    std::mutex& mutex() { return mu_; }  // one call at a time on the socket

    bool dead() const { return dead_.load(); }
    void mark_dead(const std::string& why);
    // DeviceError when dead: "RPC server <endpoint> ...".
    void check_alive(const char* doing) const;
    // Whether the socket is closed or failed (peer gone), without blocking.
    bool socket_broken() const;

    // Bytes this process sent to / received from the server on this connection (TCP_INFO).
    uint64_t bytes_sent() const;
    uint64_t bytes_received() const;

    // Which of `nodes` the server's device number `device` computes, one entry per node: what dyngraph's
    // rpc-server says (asked once per op, types and shapes; rpc_caps.h), or ggml's "yes" for a server
    // that does not answer such queries. DeviceError (the connection then dead) when the server fails to.
    std::vector<char> supports(uint32_t device, const std::vector<const ggml_tensor*>& nodes);

    sockaddr_in peer() const { return peer_; }  // the relay's address: where ggml's socket goes
    std::string relay_error() const;             // what the relay refused of the server ("" nothing)
    int fd() const { return fd_; }

private:
    Connection() = default;
    std::string endpoint_, alias_;
    sockaddr_in peer_{};
    int fd_ = -1;
    double timeout_ = 60;
    ggml_backend_reg_t reg_ = nullptr;
    ggml_backend_buffer_t anchor_ = nullptr;  // keeps ggml's socket for this endpoint open
    std::unique_ptr<Relay> relay_;            // destroyed after the destructor's last call through it
    std::mutex mu_;
    std::mutex caps_mu_;
    std::map<std::string, char> caps_;  // encoded node -> whether the server's device computes it
    std::atomic<bool> dead_{false};
    std::string why_;
    friend class Guard;
};

// Calls into ggml's RPC client for these connections, from this thread,
// until destroyed. Use through guarded(): it turns a Lost into DeviceError.
class Guard {
public:
    Guard(std::vector<Connection*> conns, double timeout);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    bool timed_out() const { return timed_out_.load(); }
    const std::vector<Connection*>& connections() const { return conns_; }

    std::atomic<bool> timed_out_{false};

private:
    std::vector<Connection*> conns_;
};

// Run `fn` under a Guard of `conns` (each checked alive first). A lost call
// marks the connections that failed dead and throws DeviceError naming them
// and `doing`; another ggml abort is a GgmlAbort. Without connections `fn`
// runs unguarded unless `always` (then an abort is a GgmlAbort too).
template <class Fn>
auto guarded(const std::vector<Connection*>& conns, const char* doing, Fn&& fn, bool always = false) -> decltype(fn());

[[noreturn]] void lost(const Guard& g, const Lost& e, const char* doing);
double max_timeout(const std::vector<Connection*>& conns);

template <class Fn>
auto guarded(const std::vector<Connection*>& conns, const char* doing, Fn&& fn, bool always) -> decltype(fn()) {
    for (Connection* c : conns) c->check_alive(doing);
    if (conns.empty() && !always) return fn();
    Guard g(conns, conns.empty() ? 86400.0 : max_timeout(conns));
    try {
        return fn();
    } catch (const Lost& e) {
        lost(g, e, doing);
    }
}

// Whether `be` computes each of `nodes`: ggml_backend_supports_op, or for a device of an RPC server this
// process is connected to, what the server says (Connection::supports).
std::vector<char> backend_supports(ggml_backend_t be, const std::vector<const ggml_tensor*>& nodes);

// Install the abort callback (once per process).
void install_abort_handler();

// The connections opened in this process that are still in use.
std::vector<std::shared_ptr<Connection>> open_connections();

}  // namespace remote
}  // namespace dg

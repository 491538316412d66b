// The client's side of every RPC connection: a relay between ggml's RPC client
// and the server that treats every answer as hostile.
//
// ggml's client trusts what a server says: an alignment of 0 is a division by
// zero in dyngraph's planner (SIGFPE), a device count of 2^32-1 a loop that
// allocates until the process dies, a base pointer or buffer size anything at
// all. dyngraph does not change ggml; instead ggml's client connects to a relay
// on 127.0.0.1 (a port of this process, accepting only this process's own
// sockets), and the relay:
//
// - authenticates to the server first when a token is given (the challenge and
//   response of docs/guide/security.md: HMAC-SHA256 over a nonce of the server);
// - then agrees with dyngraph's server on capability queries (rpc_caps.h;
//   a server that closes the connection at the question is connected to
//   again, and asked nothing), which ask_supports() sends between requests;
// - forwards each request as it is, and reads each answer itself: the size
//   the command's answer has (anything else is refused before a byte of it is
//   buffered), then its values: device count in [1, 64], alignment a power of
//   two up to 1 MiB, max size non-zero, a buffer at least the size asked and
//   at most twice it plus 1 MiB, base pointers non-null with the buffer not
//   wrapping around, allocation sizes up to 2^48, free memory at most the total,
//   device numbers below the count, results 0 or 1;
// - on the first bad answer (or a server that closes) closes both sockets:
//   ggml's call fails, the Guard turns it into a DeviceError naming the
//   endpoint and, through error(), what was wrong.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dg::remote {

class Relay {
public:
    // Listen on 127.0.0.1 (an ephemeral port) for this process's connections to `endpoint` (at `upstream`).
    // DeviceError when it cannot listen.
    Relay(std::string endpoint, const sockaddr_in& upstream, std::string token, double connect_timeout);
    ~Relay();
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;

    const sockaddr_in& address() const { return addr_; }  // where ggml connects
    int port() const { return ntohs(addr_.sin_port); }
    std::string error() const;  // why the relay closed a connection ("" when it did not)

    // Which of `count` nodes the server's device computes (rpc_caps.h), asked between ggml's requests on
    // the live connection: one byte per node; nullopt when the server does not answer such queries
    // (ggml's own server) or no connection is open. DeviceError when it fails to answer in time or answers wrongly (the
    // connection is then closed, as for any bad answer).
    std::optional<std::string> ask_supports(const std::string& query, uint32_t count, double timeout);

    // Limits on what a server may answer.
    static constexpr uint32_t kMaxDevices = 64;
    static constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;
    static constexpr uint64_t kMaxAllocSize = uint64_t(1) << 48;

private:
    struct Session;
    void accept_loop();
    void serve(int client);
    int connect_upstream(std::string& why);  // a socket to the server (-1 and why when it fails)
    void replace_fd(int old_fd, int new_fd);
    bool own_socket(const sockaddr_in& peer) const;
    void set_error(const std::string& why);

    std::string endpoint_, token_;
    sockaddr_in upstream_{}, addr_{};
    double connect_timeout_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};  // a pipe written when the relay stops (its threads poll it)
    std::atomic<bool> stop_{false};
    std::atomic<uint32_t> devices_{0};  // the count the server gave (its connections share it)
    std::thread acceptor_;
    mutable std::mutex mu_;
    std::string error_;
    std::vector<std::thread> sessions_;
    std::vector<int> live_fds_;
    std::vector<std::shared_ptr<Session>> live_;  // sessions past their negotiation, the newest last
};

// HMAC-SHA256 (RFC 2104 over FIPS 180-4), for the token's challenge and response.
std::string hmac_sha256(const std::string& key, const std::string& message);

// The authentication exchange (docs/guide/security.md), as the relay does it and the server expects it.
inline constexpr char kAuthHello[] = "DGAUTH1\n";  // client -> server, 8 bytes
inline constexpr size_t kAuthNonce = 32;          // server -> client
inline constexpr char kAuthContext[] = "dyngraph-rpc-auth-v1";  // HMAC(token, context + nonce): client -> server
inline constexpr char kAuthOk[] = "DGOK";         // server -> client, 4 bytes

}  // namespace dg::remote

// Which ops a remote device computes: a question dyngraph's client asks
// dyngraph's rpc-server, beside ggml's protocol.
//
// ggml's RPC client answers "yes" for every op without asking its server (its
// supports_op is a TODO), so a client would send a CUDA server an attention
// shape its flash-attention kernel aborts on. Instead, the relay (rpc_relay.h)
// and the supervisor (api/dyngraph/rpc_supervisor.py) agree at connection time
// (after the token's exchange, before ggml's HELLO) that they both speak it:
//
//   client -> server  kHello (8 bytes)      server -> client  kOk (4 bytes)
//
// A server that does not (ggml's own rpc-server) closes the connection at
// kHello; the relay connects again and every op counts as supported, as ggml
// says. After the agreement, between ggml's requests:
//
//   client -> server  | kSupportsCmd (1) | size (u64) | query (size bytes) |
//   server -> client  | count (u64) | count bytes, 1 for a node the device computes, else 0 |
//
// query: | kMagic (u32) | device (u32) | count (u32) | count nodes |
// node:  | mask (u32: bit i = src[i] is given) | tensor | a tensor per bit of the mask, in order |
// tensor: | type (u32) | op (u32) | ne (4 x i64) | nb (4 x u64) | op_params (16 x i32) | flags (i32) |
//
// The supervisor has the worker (the process with the device) answer, so a
// query ggml's checks crash on ends that worker, not the server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ggml-backend.h"

namespace dg::remote::caps {

inline constexpr char kHello[] = "DGCAPS1\n";  // 8 bytes
inline constexpr char kOk[] = "DGC1";          // 4 bytes
inline constexpr uint8_t kSupportsCmd = 0xD0;  // outside ggml's commands
inline constexpr uint32_t kMagic = 0x31514744; // "DGQ1"
inline constexpr uint32_t kMaxNodes = 4096;    // per query
inline constexpr size_t kTensorBytes = 4 + 4 + 8 * 4 + 8 * 4 + GGML_MAX_OP_PARAMS + 4;
inline constexpr size_t kMaxQueryBytes = 12 + size_t(kMaxNodes) * (4 + (1 + GGML_MAX_SRC) * kTensorBytes);

// The client: one node (its op, shape, types and its sources'), appended to `out`.
void encode_node(const ggml_tensor* t, std::string& out);
// A query of encoded nodes (each from encode_node) for the server's device `device`.
std::string encode_query(uint32_t device, const std::vector<std::string>& nodes);

// The worker: the answer to `query` for its devices `devs` (one byte per node); an op in `refused`
// (ggml op numbers) is never supported. std::invalid_argument (ValueError) naming what is malformed.
std::string answer(const std::vector<ggml_backend_dev_t>& devs, const std::string& query,
                   const std::vector<int>& refused);

}  // namespace dg::remote::caps

// Placement: which device each op of a partition runs on, when a partition
// is compiled for devices other than the host CPU or for several of them.
//
// Splitting a program over devices (as llama.cpp's --rpc does for a model's
// layers): the ops stay in program order and are cut into contiguous runs,
// one per device, at *narrow points*, where a single computed tensor (the
// residual stream of a transformer) flows from the ops before to the ops after.
// Tensors computed from the runtime inputs alone (a mask from the positions)
// do not count: the scheduler copies them where they are needed. A cut never
// separates the ops that use one state tensor (a KV cache stays with its layer).
//
// - by layer: the program's layers are the runs between narrow points, where
//   a run that reads no weight and writes no state joins the next one; with
//   state (a decoder's KV cache), a layer begins only at the narrow point before
//   a run that uses state, so a layer is its attention and its MLP. Device i
//   gets the layers whose middle falls in its share of the layer count.
// - by memory: the same runs, shared out by the bytes of weights and state
//   they read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "program.h"
#include "remote.h"

namespace dg {

class ResidentTensors;

enum class SplitRule { Layer = 0, Memory = 1 };

struct DeviceSlot {
    std::string name;                        // for messages
    bool host = false;                       // the host CPU: dyngraph's kernels allowed
    ggml_backend_t backend = nullptr;
    std::vector<remote::Connection*> conns;  // remote devices: guard calls with these
};

struct Placement {
    std::vector<DeviceSlot> slots;  // the scheduler's backends, in its order (the CPU backend last)
    std::vector<int> op_slot;       // per op
    std::vector<const ResidentTensors*> resident;  // per slot: the weights and state its ops read
    std::vector<remote::Connection*> conns;        // every remote connection of the slots
    int host_slot = -1;   // the host CPU's slot (the scheduler's last): where an op no device can run goes
    bool strict = false;  // refuse such an op instead (CompileError naming the op and the device)
};

// Per op: the index into `shares` (one per device, in device order, > 0) of
// the device it runs on. CompileError when the program has fewer places to
// cut than devices need.
std::vector<int> split_ops(const Program& prog, const std::vector<double>& shares, SplitRule rule);

// Per tensor index and device: whether a device's ops read that constant or
// state tensor (CompileError when a state tensor is read on two devices).
std::vector<std::vector<char>> resident_subsets(const Program& prog, const std::vector<int>& op_device, size_t n_devices);

}  // namespace dg

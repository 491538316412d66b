#include "placement.h"

#include <algorithm>
#include <climits>

#include "errors.h"

namespace dg {

namespace {

struct Run {
    size_t begin = 0, end = 0;  // ops [begin, end)
    uint64_t bytes = 0;         // weights and state first read here
    bool state = false;         // reads a state tensor
};

}  // namespace

std::vector<int> split_ops(const Program& prog, const std::vector<double>& shares, SplitRule rule) {
    const size_t n_ops = prog.ops.size(), n_t = prog.tensors.size(), n_dev = shares.size();
    if (n_dev == 0) fail<CompileError>("no device to place the partition on");
    if (n_dev == 1 || n_ops == 0) return std::vector<int>(n_ops, 0);
    // tensors computed from the runtime inputs alone (cheap to copy where needed: not a reason to keep ops together)
    std::vector<char> aux(n_t, 0);
    for (int32_t i : prog.inputs) aux[size_t(i)] = 1;
    for (const OpDef& op : prog.ops) {
        bool a = true;
        for (int32_t i : op.inputs) a = a && aux[size_t(i)];
        for (int32_t o : op.outputs) aux[size_t(o)] = a;
    }
    std::vector<int64_t> first(n_t, INT64_MAX), last(n_t, -1);
    for (size_t k = 0; k < n_ops; ++k)
        for (int32_t i : prog.ops[k].inputs) {
            first[size_t(i)] = std::min<int64_t>(first[size_t(i)], int64_t(k));
            last[size_t(i)] = std::max<int64_t>(last[size_t(i)], int64_t(k));
        }
    for (int32_t o : prog.outputs) last[size_t(o)] = int64_t(n_ops);
    // per cut c (between op c-1 and op c): computed tensors that cross it, and whether a state's users straddle it
    std::vector<int64_t> cross(n_ops + 2, 0), straddle(n_ops + 2, 0);
    for (size_t t = 0; t < n_t; ++t) {
        const TensorDef& d = prog.tensors[t];
        if (d.property == Property::Variable && d.producer >= 0 && !aux[t] && last[t] > d.producer) {
            cross[size_t(d.producer) + 1] += 1;
            cross[size_t(std::min<int64_t>(last[t], int64_t(n_ops) - 1)) + 1] -= 1;
        }
        if (d.property == Property::State && last[t] > first[t] && last[t] < int64_t(n_ops)) {
            straddle[size_t(first[t]) + 1] += 1;
            straddle[size_t(last[t]) + 1] -= 1;
        }
    }
    std::vector<size_t> cuts{0};
    int64_t c_cross = 0, c_straddle = 0;
    for (size_t c = 1; c < n_ops; ++c) {
        c_cross += cross[c];
        c_straddle += straddle[c];
        if (c_cross <= 1 && c_straddle == 0) cuts.push_back(c);
    }
    cuts.push_back(n_ops);
    // runs between narrow points, with what they read
    std::vector<char> counted(n_t, 0);
    bool has_state = false;
    std::vector<Run> runs;
    for (size_t r = 0; r + 1 < cuts.size(); ++r) {
        Run run{cuts[r], cuts[r + 1], 0, false};
        for (size_t k = run.begin; k < run.end; ++k)
            for (int32_t i : prog.ops[k].inputs) {
                const TensorDef& d = prog.tensors[size_t(i)];
                if (d.property == Property::Variable) continue;
                if (d.property == Property::State) run.state = has_state = true;
                if (!counted[size_t(i)]) {
                    counted[size_t(i)] = 1;
                    run.bytes += host_bytes(d, prog.static_shape(d));
                }
            }
        runs.push_back(run);
    }
    // units: runs that read nothing join the next; with state, by layer, a unit begins at a run using state
    std::vector<Run> units;
    for (const Run& run : runs) {
        bool fresh = units.empty();
        if (!fresh) {
            const Run& cur = units.back();
            const bool cur_reads = cur.bytes > 0 || cur.state;
            fresh = rule == SplitRule::Layer && has_state ? run.state && cur_reads : cur_reads;
        }
        if (fresh) {
            units.push_back(run);
        } else {
            Run& cur = units.back();
            cur.end = run.end;
            cur.bytes += run.bytes;
            cur.state = cur.state || run.state;
        }
    }
    if (units.size() > 1 && units.back().bytes == 0 && !units.back().state) {  // a tail that reads nothing
        units[units.size() - 2].end = units.back().end;
        units.pop_back();
    }
    if (units.size() < n_dev)
        fail<CompileError>("the partition splits into ", units.size(), rule == SplitRule::Layer ? " layers" : " parts",
                           " (places where one tensor flows from one part to the next), fewer than the ", n_dev,
                           " devices it is compiled for");
    double total_share = 0;
    for (double s : shares) total_share += s;
    std::vector<double> bound(n_dev);
    double acc = 0;
    for (size_t d = 0; d < n_dev; ++d) bound[d] = (acc += shares[d]) / total_share;
    double total = 0;
    for (const Run& u : units) total += rule == SplitRule::Layer ? 1.0 : double(std::max<uint64_t>(u.bytes, 1));
    std::vector<int> op_device(n_ops, 0);
    double before = 0;
    for (const Run& u : units) {
        const double w = rule == SplitRule::Layer ? 1.0 : double(std::max<uint64_t>(u.bytes, 1));
        const double mid = (before + w / 2) / total;
        before += w;
        size_t d = 0;
        while (d + 1 < n_dev && mid >= bound[d]) ++d;
        for (size_t k = u.begin; k < u.end; ++k) op_device[k] = int(d);
    }
    return op_device;
}

std::vector<std::vector<char>> resident_subsets(const Program& prog, const std::vector<int>& op_device, size_t n_devices) {
    const size_t n_t = prog.tensors.size();
    std::vector<std::vector<char>> sub(n_devices, std::vector<char>(n_t, 0));
    std::vector<int> state_device(n_t, -1);
    for (size_t k = 0; k < prog.ops.size(); ++k) {
        const int d = op_device[k];
        for (int32_t i : prog.ops[k].inputs) {
            const TensorDef& t = prog.tensors[size_t(i)];
            if (t.property == Property::Variable) continue;
            sub[size_t(d)][size_t(i)] = 1;
            if (t.property != Property::State) continue;
            if (state_device[size_t(i)] >= 0 && state_device[size_t(i)] != d)
                fail<CompileError>("state ", t.label(), " is used by ops on two devices (", state_device[size_t(i)], " and ", d,
                                   "): a state tensor lives on one device");
            state_device[size_t(i)] = d;
        }
    }
    // a constant or state no op reads (an output, or unused): held by the first device
    for (size_t i = 0; i < n_t; ++i) {
        if (prog.tensors[i].property == Property::Variable) continue;
        bool any = false;
        for (size_t d = 0; d < n_devices; ++d) any = any || sub[d][i];
        if (!any) sub[0][i] = 1;
    }
    return sub;
}

}  // namespace dg

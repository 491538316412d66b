// The cost of the C API: execute at a cached shape through dg_partition_execute (libdyngraph.so)
// against the C++ call (CompiledPartition::execute on HostTensors made once), on the same saved
// partition, loaded twice (one engine thread each). Calls alternate in rounds; medians per round.
//
//   dg_bench capi MODEL.dg [ROUNDS] [BATCH...]      (the MLP of examples/c/save_mlp.py)
//
// Prints one row per batch: C++ ns, C API ns, difference.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "bench.h"
#include "compiled_partition.h"
#include "dyngraph/dyngraph.h"
#include "host_tensor.h"
#include "saved_file.h"

using namespace dg;
using clk = std::chrono::steady_clock;

int dg_bench::capi_main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.dg [ROUNDS] [BATCH...]\n", argv[0]);
        return 2;
    }
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 2000;
    std::vector<int64_t> batches;
    for (int a = 3; a < argc; ++a) batches.push_back(std::atoll(argv[a]));
    if (batches.empty()) batches = {1, 64};

    dg_partition* p = nullptr;
    if (dg_partition_load(argv[1], "cpu:1", &p) != DG_OK) {
        std::fprintf(stderr, "%s\n", dg_last_error());
        return 1;
    }
    saved::MappedFile file(argv[1]);
    size_t body_size = 0;
    const uint8_t* body = saved::check_file(file.data(), file.size(), argv[1], body_size);
    auto engine = std::make_shared<Engine>(1);
    CompiledPartition cp(body, body_size, {}, engine, 16, true);

    std::printf("%-10s %12s %12s %12s\n", "case", "C++ ns", "C API ns", "C API - C++");
    int status = 0;
    for (int64_t n : batches) {
        dg_desc in, out;
        dg_partition_input(p, 0, &in, nullptr, nullptr);
        in.dims[0] = n;
        if (dg_partition_infer_outputs(p, &in, 1, &out, 1) != DG_OK) {
            std::fprintf(stderr, "%s\n", dg_last_error());
            return 1;
        }
        const size_t nx = size_t(n * in.dims[1]), ny = size_t(out.dims[0] * out.dims[1]);
        std::vector<float> x(nx), y1(ny), y2(ny);
        for (size_t i = 0; i < nx; ++i) x[i] = float(std::sin(0.001 * double(i)));
        HostTensor hx, hy;
        fill_host(hx, in.id, int(in.dtype), in.dims, size_t(in.ndims));
        fill_host(hy, out.id, int(out.dtype), out.dims, size_t(out.ndims));
        hx.data = x.data(), hx.nbytes = nx * 4, hx.engine = engine.get();
        hy.data = y1.data(), hy.nbytes = ny * 4, hy.writable = true, hy.engine = engine.get();
        const HostTensor* hin[1] = {&hx};
        const HostTensor* hout[1] = {&hy};
        const void* in_data[1] = {x.data()};
        void* out_data[1] = {y2.data()};
        cp.infer(hin, 1, true, true);  // cached from here on, in both
        std::vector<double> tc, ta;
        for (int r = 0; r < rounds; ++r) {
            auto t0 = clk::now();
            cp.execute(hin, 1, hout, 1);
            auto t1 = clk::now();
            if (dg_partition_execute(p, &in, in_data, 1, &out, out_data, 1) != DG_OK) return 1;
            auto t2 = clk::now();
            tc.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
            ta.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
        }
        if (y1 != y2) {
            std::fprintf(stderr, "batch %lld: the C API and the C++ call disagree\n", (long long)n);
            status = 1;
        }
        const double mc = dg_bench::median(tc), ma = dg_bench::median(ta);
        char name[32];
        std::snprintf(name, sizeof name, "mlp-b%lld", (long long)n);
        std::printf("%-10s %12.0f %12.0f %+12.0f\n", name, mc, ma, ma - mc);
    }
    dg_partition_destroy(p);
    return status;
}

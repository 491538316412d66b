// dg_bench dequant [REPS] [TYPES]: weight rows back to f32, ggml's to_float against dyngraph's
// dequantize_row (kernels/dequantize.h) per type, on a 1536 x 576 weight of normal values; ns a
// value (median of REPS passes over the weight) and whether the two gave the same bits.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../../backend/kernels/dequantize.h"
#include "bench.h"
#include "ggml-cpu.h"
#include "ggml.h"

int dg_bench::dequant_main(int argc, char** argv) {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
    const std::string only = argc > 2 ? std::string(",") + argv[2] + "," : "";
    ggml_cpu_init();
    const int64_t K = 1536, N = 576;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> w(size_t(K * N)), a(size_t(K * N)), b(size_t(K * N));
    for (float& v : w) v = nd(rng);
    const std::vector<float> imatrix(size_t(K), 1.0f);
    std::printf("%-8s %12s %12s %8s %s\n", "type", "ggml ns/v", "ours ns/v", "ratio", "bits");
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type type = ggml_type(t);
        const auto* tr = ggml_get_type_traits(type);
        if (!tr->type_name || !tr->to_float || tr->blck_size <= 1 || !dg::kernels::dequantizable(type) || K % tr->blck_size ||
            ggml_row_size(type, K) == 0)
            continue;
        if (!only.empty() && only.find("," + std::string(tr->type_name) + ",") == std::string::npos) continue;
        std::vector<uint8_t> q(ggml_row_size(type, K) * size_t(N));
        const bool iq = std::strncmp(tr->type_name, "iq", 2) == 0;
        if (ggml_quantize_chunk(type, w.data(), q.data(), 0, N, K, iq ? imatrix.data() : nullptr) == 0) continue;
        const size_t row = ggml_row_size(type, K);
        std::vector<double> tg, to;
        for (int r = 0; r < reps; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            for (int64_t n = 0; n < N; ++n) tr->to_float(q.data() + size_t(n) * row, a.data() + n * K, K);
            auto t1 = std::chrono::steady_clock::now();
            for (int64_t n = 0; n < N; ++n) dg::kernels::dequantize_row(type, q.data() + size_t(n) * row, b.data() + n * K, K);
            auto t2 = std::chrono::steady_clock::now();
            tg.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(K * N));
            to.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / double(K * N));
        }
        const double g = median(tg), o = median(to);
        // the same bits, or the same values (zeros of both signs), or different values
        bool bits = true, values = true;
        for (size_t i = 0; i < a.size(); ++i) {
            bits = bits && std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
            values = values && (a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]));
        }
        std::printf("%-8s %12.3f %12.3f %8.2f %s\n", tr->type_name, g, o, g / o,
                    bits ? "same" : values ? "same values (the sign of zero differs)" : "DIFFER");
    }
    return 0;
}

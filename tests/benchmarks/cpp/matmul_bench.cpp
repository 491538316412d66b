// Which product is fastest for a weight matrix of a given type and shape:
// ggml's own ggml_mul_mat (whatever the ggml build has: its AVX2/AVX-512
// kernels, llamafile's sgemm, ...), ggml's product on weights in its
// CPU_REPACK layout (where the buffer type takes them), and dyngraph's product
// (kernels::f32_mul_mat: our kernels or OpenBLAS, what MatMul lowers to) with
// the best variant of our kernels this CPU has and, where that is above AVX2,
// with the AVX2 variant too (switched call by call, isa.h).
//
//   build/dev/tests/benchmarks/cpp/dg_bench matmul [rows] [reps] [types, e.g. q8_0,q4_1]
//
// For the matmul weights of SmolLM2-135M (K x N: 576x576, 576x192,
// 576x1536, 1536x576) in f32, bf16, f16, q8_0, q4_0, q4_1, q5_0, q5_1 (and
// q2_K, q3_K, q4_K, q5_K, q6_K where the rows are a multiple of 256 values: 1536x576), with
// `rows` activation rows (default 32), one thread. The weights are spread over
// copies that together exceed the L3 cache, and each call takes the next
// copy, so weights come from memory as in a model's forward pass
// (DG_BENCH_WEIGHT_COPIES=1: one copy, the weights in cache, to tell a
// kernel's compute from its memory traffic). The paths
// run interleaved; medians in microseconds and GFLOP/s are printed, each
// result checked against the f32 product of the dequantized weights.
// The "dyngraph avx2" column is our AVX2 kernels on this CPU (1 row f32:
// f32_matvec's AVX2 variant); the "panels" columns (f32, and the types
// quant_panels_take at that level, f16 and bf16) are our product over the weights
// laid out in panels, as a compiled partition holds them (kernels/f32_panels.h,
// quant_panels.h), with the best variant and the AVX2 one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/f32_matmul.h"
#include "kernels/f32_panels.h"
#include "kernels/isa.h"
#include "kernels/quant_panels.h"

namespace {

using Clock = std::chrono::steady_clock;

using dg_bench::median;

ggml_backend_buffer_type_t repack_buft() {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    using get_extra_t = ggml_backend_buffer_type_t* (*)(ggml_backend_dev_t);
    auto get = reinterpret_cast<get_extra_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
    if (!get) return nullptr;
    for (ggml_backend_buffer_type_t* p = get(dev); p && *p; ++p)
        if (std::strcmp(ggml_backend_buft_name(*p), "CPU_REPACK") == 0) return *p;
    return nullptr;
}

enum class Path { ggml, repack, dyngraph, dyngraph_avx2, panels, panels_avx2 };

namespace k = dg::kernels;

// One weight copy, its graph and the memory both need.
struct Case {
    ggml_context* ctx = nullptr;
    ggml_context* wctx = nullptr;
    ggml_backend_buffer_t wbuf = nullptr;
    ggml_cgraph* graph = nullptr;
    ggml_tensor* out = nullptr;
    std::vector<uint8_t> work;
    ggml_cplan plan{};
};

struct Bench {
    int64_t K, N, M;
    ggml_type type;
    std::vector<float> act;      // M x K
    std::vector<uint8_t> wdata;  // N rows of `type`
    std::vector<float> ref;      // M x N: act . dequant(w)^T in double
};

void make_data(Bench& b, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(size_t(b.N * b.K));
    for (auto& v : w) v = nd(rng) * 0.05f;
    b.act.resize(size_t(b.M * b.K));
    for (auto& v : b.act) v = nd(rng);
    b.wdata.resize(ggml_row_size(b.type, b.K) * size_t(b.N));
    if (b.type == GGML_TYPE_F32) std::memcpy(b.wdata.data(), w.data(), w.size() * 4);
    else {
        // (iq2_xxs, iq2_xs and iq1_s quantize only with an importance matrix, and iq1_m without one makes
        // subnormal values: equal weights for the i-quants of 1-3 bits, as llama-quantize's files have one)
        const std::vector<float> imatrix(size_t(b.K), 1.0f);
        const bool iq = std::strncmp(ggml_type_name(b.type), "iq", 2) == 0;
        ggml_quantize_chunk(b.type, w.data(), b.wdata.data(), 0, b.N, b.K, iq ? imatrix.data() : nullptr);
    }
    std::vector<float> deq(size_t(b.K));
    b.ref.assign(size_t(b.M * b.N), 0.0f);
    for (int64_t n = 0; n < b.N; ++n) {
        const void* row = b.wdata.data() + size_t(n) * ggml_row_size(b.type, b.K);
        if (b.type == GGML_TYPE_F32) std::memcpy(deq.data(), row, size_t(b.K) * 4);
        else ggml_get_type_traits(b.type)->to_float(row, deq.data(), b.K);
        for (int64_t m = 0; m < b.M; ++m) {
            double s = 0;
            for (int64_t k = 0; k < b.K; ++k) s += double(b.act[size_t(m * b.K + k)]) * deq[size_t(k)];
            b.ref[size_t(m * b.N + n)] = float(s);
        }
    }
}

bool make_case(const Bench& b, Path path, ggml_backend_buffer_type_t rbuft, Case& c) {
    ggml_init_params ip = {64 * ggml_tensor_overhead() + ggml_graph_overhead() + size_t(b.M * b.K + b.M * b.N) * 4 + 4096,
                           nullptr, false};
    c.ctx = ggml_init(ip);
    // the weight in a context of its own buffer (CPU or CPU_REPACK)
    ggml_init_params wp = {4 * ggml_tensor_overhead(), nullptr, true};
    ggml_context* wctx = ggml_init(wp);
    ggml_tensor* w = ggml_new_tensor_2d(wctx, b.type, b.K, b.N);
    ggml_backend_buffer_type_t buft = path == Path::repack ? rbuft : ggml_backend_cpu_buffer_type();
    if (path == Path::repack) {
        // does the repack buffer take this weight? (asked as llama.cpp and resident.cpp ask)
        ggml_init_params pp = {4 * ggml_tensor_overhead(), nullptr, true};
        ggml_context* pctx = ggml_init(pp);
        ggml_tensor* w0 = ggml_new_tensor_2d(pctx, b.type, b.K, b.N);
        ggml_tensor* op = ggml_mul_mat(pctx, w0, ggml_new_tensor_2d(pctx, GGML_TYPE_F32, b.K, b.M));
        ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(rbuft, 0);
        w0->buffer = probe;
        const bool ok = probe && ggml_backend_dev_supports_op(ggml_backend_buft_get_device(rbuft), op);
        if (probe) ggml_backend_buffer_free(probe);
        ggml_free(pctx);
        if (!ok) {
            ggml_free(wctx);
            return false;
        }
    }
    c.wctx = wctx;
    c.wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    const bool panels = path == Path::panels || path == Path::panels_avx2;
    // (quantized weights in panels: the AVX2 and VNNI products; below AVX2 it is portable code)
    const bool quant = k::quant_panels_take(b.type) && panels && k::kernel_isa() >= k::Isa::avx2;
    const bool half = b.type == GGML_TYPE_F16 || b.type == GGML_TYPE_BF16;
    if (panels && b.type != GGML_TYPE_F32 && !half && !quant) return false;
    if (panels && b.type == GGML_TYPE_BF16 && dg::kernels::bf16_pair_panels(b.K)) {
        dg::kernels::pack_bf16_pair_panels(b.N, b.K, reinterpret_cast<const uint16_t*>(b.wdata.data()), static_cast<uint16_t*>(w->data));
        dg::kernels::mark_panels(w);
    } else if (panels && half) {
        dg::kernels::pack_half_panels(b.N, b.K, reinterpret_cast<const uint16_t*>(b.wdata.data()), static_cast<uint16_t*>(w->data));
        dg::kernels::mark_panels(w);
    } else if (quant) {
        dg::kernels::pack_quant_panels(b.type, b.N, b.K / ggml_blck_size(b.type), b.wdata.data(), static_cast<uint8_t*>(w->data));
        dg::kernels::mark_panels(w);
    } else if (panels) {
        dg::kernels::pack_panels(b.N, b.K, reinterpret_cast<const float*>(b.wdata.data()), b.K, static_cast<float*>(w->data));
        dg::kernels::mark_panels(w);
    } else {
        ggml_backend_tensor_set(w, b.wdata.data(), 0, b.wdata.size());
    }
    ggml_tensor* y = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, b.K, b.M);
    std::memcpy(y->data, b.act.data(), b.act.size() * 4);
    if (path != Path::ggml && path != Path::repack) {
        if (!dg::kernels::f32_matmul_applies(w, y, 1)) return false;
        c.out = dg::kernels::mul_mat(c.ctx, w, y);
    } else {
        c.out = ggml_mul_mat(c.ctx, w, y);
    }
    c.graph = ggml_new_graph(c.ctx);
    ggml_build_forward_expand(c.graph, c.out);
    c.plan = ggml_graph_plan(c.graph, 1, nullptr);
    return true;
}

double max_rel_err(const Bench& b, const Case& c) {
    double num = 0, den = 0;
    const float* o = static_cast<const float*>(c.out->data);
    for (size_t i = 0; i < b.ref.size(); ++i) {
        num = std::max(num, double(std::fabs(o[i] - b.ref[i])));
        den = std::max(den, double(std::fabs(b.ref[i])));
    }
    return num / den;
}

}  // namespace

int dg_bench::matmul_main(int argc, char** argv) {
    const int64_t M = argc > 1 ? std::atoll(argv[1]) : 32;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
    ggml_cpu_init();
    ggml_backend_buffer_type_t rbuft = repack_buft();
    // (the output projection, 576x49152, multiplies one row in a prefill that keeps only the last logits)
    const int64_t shapes[][2] = {{576, 576}, {576, 192}, {576, 1536}, {1536, 576}};
    const ggml_type types[] = {GGML_TYPE_F32,  GGML_TYPE_BF16, GGML_TYPE_F16,  GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                               GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                               GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
                               GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                               GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4};
    std::mt19937 rng(1);
    std::printf("rows %lld, 1 thread, median of %d calls, weights from %s; us (GFLOP/s) [max error / max |ref|]\n",
                (long long)M, reps, std::getenv("DG_BENCH_WEIGHT_COPIES") ? "DG_BENCH_WEIGHT_COPIES copies" : "memory");
    // our kernels' best variant here, and (where it is above avx2) the AVX2 one beside it, switched per call
    const k::Isa best = k::kernel_isa();
    const bool both = best > k::Isa::avx2;
    std::printf("%-6s %-12s %24s %24s %24s", "type", "K x N", "ggml", "ggml repack",
                (std::string("dyngraph ") + k::isa_name(best)).c_str());
    if (both) std::printf(" %24s", "dyngraph avx2");
    std::printf(" %24s", (std::string("panels ") + k::isa_name(best)).c_str());
    std::printf(both ? " %24s\n" : "\n", "panels avx2");
    const std::string only = argc > 3 ? std::string(",") + argv[3] + "," : "";
    for (ggml_type t : types) {
        if (!only.empty() && only.find(std::string(",") + ggml_type_name(t) + ",") == std::string::npos) continue;
        for (const auto& s : shapes) {
            if (s[0] % ggml_blck_size(t) != 0) continue;  // (k-quants: rows of a multiple of 256 values)
            Bench b{s[0], s[1], M, t, {}, {}, {}};
            make_data(b, rng);
            const size_t wbytes = b.wdata.size();
            const char* copies_env = std::getenv("DG_BENCH_WEIGHT_COPIES");
            const int copies = copies_env ? std::max(1, std::atoi(copies_env))
                                          : int(std::max<size_t>(2, (64u << 20) / std::max<size_t>(wbytes, 1)));
            std::vector<Path> paths = {Path::ggml, Path::repack, Path::dyngraph};
            if (both) paths.push_back(Path::dyngraph_avx2);
            paths.push_back(Path::panels);
            if (both) paths.push_back(Path::panels_avx2);
            std::vector<std::vector<Case>> cases(paths.size());
            for (auto& v : cases) v.reserve(64);  // no reallocation: plan.work_data points into each element
            std::vector<bool> have(paths.size(), true);
            for (size_t p = 0; p < paths.size(); ++p) {
                if (paths[p] == Path::repack && !rbuft) { have[p] = false; continue; }
                // (at the level the path computes at: which weights the panels take depends on it)
                const bool avx2 = paths[p] == Path::dyngraph_avx2 || paths[p] == Path::panels_avx2;
                k::set_kernel_isa_for_benchmark(avx2 ? k::Isa::avx2 : best);
                for (int i = 0; i < std::min(copies, 64) && have[p]; ++i) {
                    Case c;
                    if (!make_case(b, paths[p], rbuft, c)) have[p] = false;
                    else {
                        cases[p].push_back(c);
                        Case& kept = cases[p].back();  // the work buffer of the stored copy
                        kept.work.resize(kept.plan.work_size + 64);
                        kept.plan.work_data = kept.work.data();
                    }
                }
            }
            k::set_kernel_isa_for_benchmark(best);
            std::vector<std::vector<double>> times(paths.size());
            for (int r = 0; r < reps; ++r) {
                for (size_t p = 0; p < paths.size(); ++p) {
                    if (!have[p]) continue;
                    Case& c = cases[p][size_t(r) % cases[p].size()];
                    const bool avx2 = paths[p] == Path::dyngraph_avx2 || paths[p] == Path::panels_avx2;
                    k::set_kernel_isa_for_benchmark(avx2 ? k::Isa::avx2 : best);
                    auto t0 = Clock::now();
                    ggml_graph_compute(c.graph, &c.plan);
                    times[p].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
                }
            }
            char shape[32];
            std::snprintf(shape, sizeof shape, "%lldx%lld", (long long)b.K, (long long)b.N);
            std::printf("%-6s %-12s", ggml_type_name(t), shape);
            for (size_t p = 0; p < paths.size(); ++p) {
                if (!have[p]) { std::printf(" %24s", "-"); continue; }
                const double us = median(times[p]);
                char cell[64];
                std::snprintf(cell, sizeof cell, "%.0f (%.0f) [%.0e]", us, 2.0 * M * b.K * b.N / us / 1e3,
                              max_rel_err(b, cases[p][0]));
                std::printf(" %24s", cell);
            }
            k::set_kernel_isa_for_benchmark(best);
            std::printf("\n");
            std::fflush(stdout);
            for (auto& v : cases)
                for (Case& c : v) {
                    ggml_backend_buffer_free(c.wbuf);
                    ggml_free(c.wctx);
                    ggml_free(c.ctx);
                }
        }
    }
    return 0;
}

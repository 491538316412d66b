// dyngraph.hpp: RAII and exceptions over the C API. argv[1]: the MLP of examples/c.
#include <cmath>
#include <cstdio>
#include <vector>

#include "dyngraph/dyngraph.hpp"

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    dyngraph::partition p = dyngraph::partition::load(argv[1], "cpu:2");
    const dyngraph::port x = p.input(0);
    if (x.name != "x" || x.dims.size() != 2 || std::string(x.dims[0].expr) != "batch") return 3;
    for (int64_t n : {3, 5, 3}) {
        const dyngraph::desc xd = dyngraph::with_shape(x.symbolic, {n, 256});
        const std::vector<dyngraph::desc> out = p.infer_outputs({xd});
        std::vector<float> xs(size_t(dyngraph::numel(xd))), ys(size_t(dyngraph::numel(out[0])));
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(std::sin(0.001 * double(i) + double(n)));
        p.execute({{xd, xs.data()}}, {{out[0], ys.data()}});
        double sum = 0;
        for (float v : ys) sum += v;
        std::printf("batch %lld: sum %.6f\n", (long long)n, sum);
    }
    dyngraph::partition q = std::move(p);  // moved: p holds nothing, q is destroyed once
    try {
        q.infer_outputs({dyngraph::with_shape(x.symbolic, {5000, 256})});  // above batch's range
        return 4;
    } catch (const dyngraph::error& e) {
        if (e.status() != DG_ERR_SHAPE) return 5;
        std::printf("error: %s\n", e.what());
    }
    try {
        dyngraph::partition::load("/nonexistent.dg");
        return 6;
    } catch (const dyngraph::error& e) {
        if (e.status() != DG_ERR_IR) return 7;
    }
    std::printf("cache: %llu graphs\n", (unsigned long long)q.cache_info().misses);
    return 0;
}

// dg_bench's entry: the subcommand picks the benchmark (bench.h lists them).
#include <cstdio>
#include <cstring>
#include <string>

#include "bench.h"

int main(int argc, char** argv) {
    struct Entry {
        const char* name;
        int (*run)(int, char**);
    };
    static const Entry entries[] = {
        {"rebuild", dg_bench::rebuild_main}, {"matmul", dg_bench::matmul_main}, {"capi", dg_bench::capi_main},
        {"dequant", dg_bench::dequant_main}};
    if (argc >= 2) {
        for (const Entry& e : entries) {
            if (std::strcmp(argv[1], e.name) == 0) {
                std::string self = std::string("dg_bench ") + e.name;
                argv[1] = self.data();
                return e.run(argc - 1, argv + 1);
            }
        }
    }
    std::fprintf(stderr, "usage: dg_bench rebuild|matmul|capi|dequant ARGS... (tests/benchmarks/cpp/bench.h)\n");
    return 2;
}

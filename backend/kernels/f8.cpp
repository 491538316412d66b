#include "f8.h"

#include <array>
#include <cmath>
#include <limits>

namespace dg::kernels {

namespace {

// M mantissa bits, exponent bias B; FN: no infinities
template <int M, int B, bool FN>
std::array<float, 256> decode_table() {
    constexpr int E = 7 - M;
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) {
        const int exp = (b >> M) & ((1 << E) - 1), man = b & ((1 << M) - 1);
        float v;
        if (exp == (1 << E) - 1 && (FN ? man == (1 << M) - 1 : true))
            v = FN || man != 0 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        else if (exp == 0)
            v = std::ldexp(float(man), 1 - B - M);  // subnormal
        else
            v = std::ldexp(float((1 << M) + man), exp - B - M);
        t[size_t(b)] = b & 0x80 ? -v : v;
    }
    return t;
}

}  // namespace

const float* f8_values(F8 t) {
    static const std::array<float, 256> e4m3 = decode_table<3, 7, true>();
    static const std::array<float, 256> e5m2 = decode_table<2, 15, false>();
    return t == F8::E4M3 ? e4m3.data() : e5m2.data();
}

}  // namespace dg::kernels

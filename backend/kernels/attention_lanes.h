// The attention of up to 16 query rows of one head with their rows in vector
// lanes (attention.cpp's blocks of 8 rows or more). The scores are kept
// transposed, S^T[key][row]: one key's scores for the 16 rows lie side by
// side, so the scale, the mask, the causal cut, the running maximum, the
// exponentials and the sums are vertical vector operations, one row per lane,
// and neither the keys nor the values are packed: Q K^T broadcasts each key
// value against the 16 rows' lanes of Q^T (Q transposed once per group), and
// P V broadcasts each value against the lanes of P^T into O^T. A row's result
// is therefore the same whatever rows share its group (the thread count and
// the query block do not change it). OpenBLAS's sgemm, which this replaced,
// packed every key block and every block of probabilities again and zeroed
// the scores before writing them (docs/performance.md, "Attention with the
// rows in lanes").
#pragma once

#include <cstdint>

namespace dg::kernels {

constexpr int kLanes = 16;  // query rows per group

struct LaneGroup {
    int nq = 0;  // rows in the group, 1..kLanes
    const float* Q = nullptr;  // row r at Q + r * ldq: D floats
    int64_t ldq = 0;
    const float* K = nullptr;  // key j at K + j * ldk: D floats
    int64_t ldk = 0;
    const float* V = nullptr;  // value j at V + j * ldv: Dv floats
    int64_t ldv = 0;
    float* O = nullptr;  // output row r at O + r * ldo: Dv floats, written (not added to)
    int64_t ldo = 0;
    int64_t D = 0, Dv = 0;
    int64_t nkeys = 0;  // keys [0, nkeys) are read
    float scale = 1.0f;
    // the additive f32 mask (mask_i32 false) or the bool mask as I32 (0: masked out) of row r at key 0,
    // or all null (no mask); shared_mask: every row's pointer is the same
    const void* mask[kLanes] = {};
    bool mask_i32 = false, shared_mask = false;
    // causal: row r sees keys j <= last_key[r] only (a negative value: none)
    bool causal = false;
    int64_t last_key[kLanes] = {};
};

// softmax(Q K^T * scale + mask [+ the causal cut]) V for the group's rows: online over blocks of keys,
// a row whose keys are all masked out is 0.
void attention_lanes(const LaneGroup& g);

}  // namespace dg::kernels

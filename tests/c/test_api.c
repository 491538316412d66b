/* The C API's contract, from C: statuses and messages for bad arguments, ports and symbols,
 * state, the cache. argv[1]: the kv partition of tests/test_c_api.py (out = (cache after
 * cache[pos] = new) @ ones(4, 2), cache a [8, 4] state), argv[2]: the MLP of examples/c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dyngraph/dyngraph.h"

static int failures = 0;
#define EXPECT(cond)                                                                            \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            printf("FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, dg_last_error()); \
            ++failures;                                                                         \
        }                                                                                       \
    } while (0)
#define EXPECT_STATUS(call, want)                                                                     \
    do {                                                                                              \
        dg_status s_ = (call);                                                                        \
        if (s_ != (want)) {                                                                           \
            printf("FAIL %s:%d: %s gave %s, expected %s: %s\n", __FILE__, __LINE__, #call, dg_status_name(s_), \
                   #want, dg_last_error());                                                           \
            ++failures;                                                                               \
        }                                                                                             \
    } while (0)
#define MESSAGE_HAS(text) EXPECT(strstr(dg_last_error(), (text)) != NULL)

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    dg_partition *p = NULL, *m = NULL;

    /* loading: bad arguments and engines */
    EXPECT_STATUS(dg_partition_load(argv[1], "cpu", NULL), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_load(NULL, "cpu", &p), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_load(argv[1], "tpu", &p), DG_ERR_INVALID);
    MESSAGE_HAS("unknown engine 'tpu'");
    EXPECT(p == NULL);
    EXPECT_STATUS(dg_partition_load(argv[1], "cpu:0", &p), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_load(argv[1], "cpu:x", &p), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_load(argv[1], "gpu:NoSuchDevice0", &p), DG_ERR_DEVICE);
    EXPECT_STATUS(dg_partition_load(argv[1], "rpc:nohostport", &p), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_load("/nonexistent/x.dg", "cpu", &p), DG_ERR_IR);
    MESSAGE_HAS("cannot read /nonexistent/x.dg");
    EXPECT_STATUS(dg_partition_load("/", "cpu", &p), DG_ERR_IR);
    MESSAGE_HAS("is a directory");
    EXPECT_STATUS(dg_partition_load_bytes(NULL, 0, "cpu", &p), DG_ERR_IR);
    MESSAGE_HAS("too short");
    EXPECT_STATUS(dg_partition_load(argv[1], "cpu:2", &p), DG_OK);
    EXPECT_STATUS(dg_partition_load(argv[2], NULL, &m), DG_OK);
    if (!p || !m) return 1;

    /* ports and symbols */
    EXPECT(dg_partition_num_inputs(p) == 2 && dg_partition_num_outputs(p) == 1 && dg_partition_num_states(p) == 1);
    EXPECT(dg_partition_num_inputs(NULL) == -1);
    EXPECT(dg_partition_num_symbols(p) == 1);
    dg_desc d, pos_d;
    dg_dim dims[DG_MAX_NDIMS];
    const char *name = NULL;
    EXPECT_STATUS(dg_partition_input(p, 0, &d, dims, &name), DG_OK);
    EXPECT(strcmp(name, "new") == 0 && d.id == 1 && d.dtype == DG_F32 && d.ndims == 2);
    EXPECT(d.dims[0] == DG_DIM_DYNAMIC && d.dims[1] == 4);
    EXPECT(dims[0].symbol == 0 && strcmp(dims[0].expr, "s") == 0 && dims[0].min == 1 && dims[0].max == 8);
    EXPECT(dims[1].symbol == -1 && dims[1].value == 4 && strcmp(dims[1].expr, "4") == 0);
    EXPECT_STATUS(dg_partition_input(p, 1, &pos_d, NULL, NULL), DG_OK);
    EXPECT(pos_d.dtype == DG_I64 && pos_d.id == 2);
    EXPECT_STATUS(dg_partition_input(p, 2, &d, NULL, NULL), DG_ERR_INVALID);
    MESSAGE_HAS("input 2 does not exist");
    EXPECT_STATUS(dg_partition_input(p, -1, &d, NULL, NULL), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_output(p, 0, &d, dims, &name), DG_OK);
    EXPECT(d.ndims == 2 && d.dims[0] == 8 && d.dims[1] == 2);
    const char *sym = NULL;
    int64_t lo = 0, hi = 0;
    EXPECT_STATUS(dg_partition_symbol(p, 0, &sym, &lo, &hi), DG_OK);
    EXPECT(strcmp(sym, "s") == 0 && lo == 1 && hi == 8);
    EXPECT_STATUS(dg_partition_symbol(p, 1, &sym, &lo, &hi), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_state(p, 0, &d, &name), DG_OK);
    EXPECT(strcmp(name, "cache") == 0 && d.ndims == 2 && d.dims[0] == 8 && d.dims[1] == 4);

    /* execute: cache[pos] = new; out = cache @ ones */
    dg_desc in[2], out;
    EXPECT_STATUS(dg_partition_input(p, 0, &in[0], NULL, NULL), DG_OK);
    in[0].dims[0] = 2;
    in[1] = pos_d;
    in[1].dims[0] = 2;
    float newv[8] = {1, 1, 1, 1, 1, 1, 1, 1}, y[16], cache[32];
    int64_t posv[2] = {0, 5};
    const void *in_data[2] = {newv, posv};
    void *out_data[1] = {y};
    EXPECT_STATUS(dg_partition_infer_outputs(p, in, 2, &out, 1), DG_OK);
    EXPECT(out.ndims == 2 && out.dims[0] == 8 && out.dims[1] == 2);
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_OK);
    EXPECT(y[0] == 4 && y[1] == 4 && y[2] == 0 && y[10] == 4 && y[11] == 4 && y[12] == 0);
    EXPECT_STATUS(dg_partition_read_state(p, 0, cache, sizeof cache), DG_OK);
    EXPECT(cache[0] == 1 && cache[4] == 0 && cache[20] == 1);
    EXPECT_STATUS(dg_partition_read_state(p, 0, cache, 12), DG_ERR_SHAPE);
    EXPECT_STATUS(dg_partition_read_state(p, 1, cache, sizeof cache), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_reset_state(p), DG_OK);
    EXPECT_STATUS(dg_partition_read_state(p, 0, cache, sizeof cache), DG_OK);
    EXPECT(cache[0] == 0 && cache[20] == 0);
    for (int i = 0; i < 32; ++i) cache[i] = 0.5f;
    EXPECT_STATUS(dg_partition_write_state(p, 0, cache, sizeof cache), DG_OK);
    posv[1] = 1;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_OK);
    EXPECT(y[0] == 4 && y[2] == 4 && y[4] == 2 && y[15] == 2);

    /* refused arguments: typed statuses, nothing written */
    for (int i = 0; i < 16; ++i) y[i] = -7;
    posv[1] = 8; /* out of the cache's rows */
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_ERR_SHAPE);
    EXPECT(y[0] == -7);
    posv[1] = 1;
    in[0].dims[0] = 9; /* above s's range */
    EXPECT_STATUS(dg_partition_infer_outputs(p, in, 2, &out, 1), DG_ERR_SHAPE);
    in[0].dims[0] = 3; /* disagrees with pos's length */
    EXPECT_STATUS(dg_partition_infer_outputs(p, in, 2, &out, 1), DG_ERR_SHAPE);
    in[0].dims[0] = 2;
    in[0].dtype = DG_F16;
    EXPECT(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1) == DG_ERR_DTYPE);
    in[0].dtype = (dg_dtype)99;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_ERR_DTYPE);
    in[0].dtype = DG_F32;
    in[0].ndims = 7;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_ERR_INVALID);
    in[0].ndims = 2;
    in[0].dims[1] = -3;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_ERR_SHAPE);
    in[0].dims[1] = 4;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 1, &out, out_data, 1), DG_ERR_SHAPE);
    MESSAGE_HAS("expected 2 inputs, got 1");
    EXPECT_STATUS(dg_partition_execute(p, in, NULL, 2, &out, out_data, 1), DG_ERR_INVALID);
    const void *null_data[2] = {NULL, posv};
    EXPECT_STATUS(dg_partition_execute(p, in, null_data, 2, &out, out_data, 1), DG_ERR_INVALID);
    dg_desc bad_out = out;
    bad_out.dims[0] = 7;
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &bad_out, out_data, 1), DG_ERR_SHAPE);
    EXPECT(y[0] == -7);
    EXPECT_STATUS(dg_partition_execute(NULL, in, in_data, 2, &out, out_data, 1), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1), DG_OK);
    EXPECT(y[0] == 4);

    /* the cache */
    dg_cache_info info;
    EXPECT_STATUS(dg_partition_cache_info(p, &info), DG_OK);
    EXPECT(info.misses == 1 && info.hits >= 2 && info.entries == 1 && info.capacity == 16);
    EXPECT_STATUS(dg_partition_set_cache_capacity(p, 0), DG_ERR_INVALID);
    EXPECT_STATUS(dg_partition_set_cache_capacity(p, 2), DG_OK);
    EXPECT_STATUS(dg_partition_clear_cache(p), DG_OK);
    EXPECT_STATUS(dg_partition_cache_info(p, &info), DG_OK);
    EXPECT(info.entries == 0 && info.capacity == 2);

    /* more inputs than the fast path takes: the same checks */
    dg_desc many[12];
    const void *many_data[12];
    for (int i = 0; i < 12; ++i) many[i] = in[0], many_data[i] = newv;
    EXPECT_STATUS(dg_partition_execute(p, many, many_data, 12, &out, out_data, 1), DG_ERR_SHAPE);

    EXPECT(dg_dtype_size(DG_BF16) == 2 && dg_dtype_size(DG_I64) == 8 && dg_dtype_size((dg_dtype)42) == 0);
    EXPECT(strcmp(dg_version(), "0.1.0") == 0);
    dg_partition_destroy(p);
    dg_partition_destroy(m);
    dg_partition_destroy(NULL);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}

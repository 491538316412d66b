/* Run an MLP saved from Python (examples/c/save_mlp.py) at several batch sizes, from C.
 *
 *   ./mlp mlp.dg [OUTDIR] [BATCH...]
 *
 * Prints the partition's input as compiled (its dynamic dimension, by name and range), then
 * for each batch n runs x[i] = sin(0.001 i + n) through it and prints the output's shape and
 * sum; with OUTDIR ("-": none) it writes each output to OUTDIR/y_<n>.f32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dyngraph/dyngraph.h"

#define CHECK(call)                                                                   \
    do {                                                                              \
        dg_status s_ = (call);                                                        \
        if (s_ != DG_OK) {                                                            \
            fprintf(stderr, "%s: %s\n", dg_status_name(s_), dg_last_error());         \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static int64_t numel(const dg_desc *d) {
    int64_t n = 1;
    for (int32_t i = 0; i < d->ndims; ++i) n *= d->dims[i];
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.dg [OUTDIR] [BATCH...]\n", argv[0]);
        return 2;
    }
    const char *outdir = argc > 2 ? argv[2] : "-";
    dg_partition *p = NULL;
    CHECK(dg_partition_load(argv[1], "cpu", &p));

    dg_desc x;
    dg_dim dims[DG_MAX_NDIMS];
    const char *name = NULL;
    CHECK(dg_partition_input(p, 0, &x, dims, &name));
    printf("input '%s':", name);
    for (int32_t d = 0; d < x.ndims; ++d)
        printf(" %s in [%lld, %lld]%s", dims[d].expr, (long long)dims[d].min, (long long)dims[d].max,
               dims[d].symbol >= 0 ? " (symbol)" : "");
    printf("\n");

    int nb = argc > 3 ? argc - 3 : 3;
    static char *defaults[] = {"1", "7", "64"};
    char **batches = argc > 3 ? argv + 3 : defaults;
    for (int b = 0; b < nb; ++b) {
        const int64_t n = atoll(batches[b]);
        dg_desc in = x, out;
        in.dims[0] = n;  /* the dynamic batch; the rest is static */
        CHECK(dg_partition_infer_outputs(p, &in, 1, &out, 1));
        float *xs = malloc((size_t)numel(&in) * sizeof(float));
        float *ys = malloc((size_t)numel(&out) * sizeof(float));
        if (!xs || !ys) return 1;
        for (int64_t i = 0; i < numel(&in); ++i) xs[i] = (float)sin(0.001 * (double)i + (double)n);
        const void *in_data[1] = {xs};
        void *out_data[1] = {ys};
        CHECK(dg_partition_execute(p, &in, in_data, 1, &out, out_data, 1));
        double sum = 0;
        for (int64_t i = 0; i < numel(&out); ++i) sum += ys[i];
        printf("batch %lld: output [%lld, %lld], sum %.6f\n", (long long)n, (long long)out.dims[0], (long long)out.dims[1], sum);
        if (outdir[0] != '-') {
            char path[4096];
            snprintf(path, sizeof path, "%s/y_%lld.f32", outdir, (long long)n);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(ys, sizeof(float), (size_t)numel(&out), f) != (size_t)numel(&out)) return 1;
            fclose(f);
        }
        free(xs);
        free(ys);
    }
    dg_cache_info info;
    CHECK(dg_partition_cache_info(p, &info));
    printf("graphs built: %llu, cache hits: %llu\n", (unsigned long long)info.misses, (unsigned long long)info.hits);
    dg_partition_destroy(p);
    return 0;
}

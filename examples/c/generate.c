/* Greedy generation from C with a language model saved from Python (a dyngraph.torch program
 * with a static KV cache: examples/smollm2_generate.py --save smollm2.dg).
 *
 *   ./generate MODEL.dg STEPS TOKEN...
 *
 * The saved program takes the token ids [1, n] (i64) and their positions [n] (i64) and gives
 * the logits [1, n or 1, vocab]; its KV cache is state the partition owns. The prompt is one
 * call (prefill), each new token another (decode); the program is compiled once and its two
 * graphs are built once. Prints the generated token ids, space-separated, on one line. */
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

/* One call: ids at positions pos0.. ; the last row's argmax in *next. */
static int step(dg_partition *p, const int64_t *ids, int64_t n, int64_t pos0, int64_t *next) {
    dg_desc in[2], out;
    CHECK(dg_partition_input(p, 0, &in[0], NULL, NULL));
    CHECK(dg_partition_input(p, 1, &in[1], NULL, NULL));
    in[0].dims[0] = 1;
    in[0].dims[1] = n;
    in[1].dims[0] = n;
    int64_t *pos = malloc((size_t)n * sizeof(int64_t));
    if (!pos) return 1;
    for (int64_t i = 0; i < n; ++i) pos[i] = pos0 + i;
    CHECK(dg_partition_infer_outputs(p, in, 2, &out, 1));
    int64_t rows = 1, vocab = out.dims[out.ndims - 1];
    for (int32_t d = 0; d + 1 < out.ndims; ++d) rows *= out.dims[d];
    float *logits = malloc((size_t)(rows * vocab) * sizeof(float));
    if (!logits) return 1;
    const void *in_data[2] = {ids, pos};
    void *out_data[1] = {logits};
    CHECK(dg_partition_execute(p, in, in_data, 2, &out, out_data, 1));
    const float *last = logits + (rows - 1) * vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
        if (last[v] > last[best]) best = v;  /* the first of equal maxima, as numpy's argmax */
    *next = best;
    free(pos);
    free(logits);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.dg STEPS TOKEN...\n", argv[0]);
        return 2;
    }
    const int steps = atoi(argv[2]);
    const int64_t n = argc - 3;
    int64_t *prompt = malloc((size_t)n * sizeof(int64_t));
    if (!prompt || steps < 1) return 2;
    for (int64_t i = 0; i < n; ++i) prompt[i] = atoll(argv[3 + i]);
    dg_partition *p = NULL;
    CHECK(dg_partition_load(argv[1], "cpu:1", &p));
    int64_t tok = 0, pos = n;
    if (step(p, prompt, n, 0, &tok)) return 1;
    printf("%lld", (long long)tok);
    for (int s = 1; s < steps; ++s) {
        if (step(p, &tok, 1, pos++, &tok)) return 1;
        printf(" %lld", (long long)tok);
    }
    printf("\n");
    dg_partition_destroy(p);
    free(prompt);
    return 0;
}

/* Load files through dg_partition_load_bytes and say what happened, one line per file:
 *
 *   FILE<TAB>STATUS<TAB>MESSAGE
 *
 *   ./load_check [--run N] [--engine E] FILE|DIR...
 *
 * A directory stands for its files, in name order. With --run N, a loaded partition is run:
 * its inputs' dynamic dimensions bound to N, zero-filled data, then the line gives the status
 * of infer or execute. The tests (tests/test_c_api.py, tests/test_hostile_files.py) drive it
 * with hostile files: every one must give a typed status, never a crash. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dyngraph/dyngraph.h"

static void report(const char *file, dg_status s) {
    const char *msg = s == DG_OK ? "" : dg_last_error();
    printf("%s\t%s\t", file, dg_status_name(s));
    for (const char *c = msg; *c; ++c) putchar(*c == '\n' || *c == '\t' ? ' ' : *c);
    putchar('\n');
    fflush(stdout);
}

static dg_status run(dg_partition *p, int64_t n) {
    int32_t ni = dg_partition_num_inputs(p), no = dg_partition_num_outputs(p);
    dg_desc *in = calloc((size_t)ni + 1, sizeof *in), *out = calloc((size_t)no + 1, sizeof *out);
    const void **in_data = calloc((size_t)ni + 1, sizeof *in_data);
    void **out_data = calloc((size_t)no + 1, sizeof *out_data);
    dg_status s = DG_OK;
    for (int32_t i = 0; i < ni && s == DG_OK; ++i) {
        s = dg_partition_input(p, i, &in[i], NULL, NULL);
        int64_t count = 1;
        for (int32_t d = 0; d < in[i].ndims; ++d) {
            if (in[i].dims[d] == DG_DIM_DYNAMIC) in[i].dims[d] = n;
            count *= in[i].dims[d] > 0 && in[i].dims[d] < (1 << 20) ? in[i].dims[d] : 1;
        }
        in_data[i] = calloc((size_t)count + 1, 8);
    }
    if (s == DG_OK) s = dg_partition_infer_outputs(p, in, ni, out, no);
    for (int32_t j = 0; j < no && s == DG_OK; ++j) {
        int64_t count = 1;
        for (int32_t d = 0; d < out[j].ndims; ++d) count *= out[j].dims[d];
        out_data[j] = count < (1 << 26) ? calloc((size_t)count + 1, 8) : NULL;
        if (!out_data[j]) s = DG_ERR_OUT_OF_MEMORY;
    }
    if (s == DG_OK) s = dg_partition_execute(p, in, in_data, ni, out, out_data, no);
    for (int32_t i = 0; i < ni; ++i) free((void *)in_data[i]);
    for (int32_t j = 0; j < no; ++j) free(out_data[j]);
    free(in), free(out), free(in_data), free(out_data);
    return s;
}

static void check(const char *file, const char *engine, int64_t run_n) {
    FILE *f = fopen(file, "rb");
    if (!f) {
        printf("%s\tUNREADABLE\t\n", file);
        return;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    size_t got = fread(buf, 1, (size_t)(size > 0 ? size : 0), f);
    fclose(f);
    dg_partition *p = NULL;
    dg_status s = dg_partition_load_bytes(buf, got, engine, &p);
    free(buf); /* the partition keeps no tie to the caller's bytes */
    if (s == DG_OK && run_n > 0) s = run(p, run_n);
    report(file, s);
    dg_partition_destroy(p);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int64_t run_n = 0;
    const char *engine = "cpu:1";
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--run") && a + 1 < argc) {
            run_n = atoll(argv[++a]);
            continue;
        }
        if (!strcmp(argv[a], "--engine") && a + 1 < argc) {
            engine = argv[++a];
            continue;
        }
        struct stat st;
        if (stat(argv[a], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[a]);
            char **names = NULL;
            size_t n = 0;
            for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.') continue;
                names = realloc(names, (n + 1) * sizeof *names);
                names[n] = malloc(strlen(argv[a]) + strlen(e->d_name) + 2);
                sprintf(names[n++], "%s/%s", argv[a], e->d_name);
            }
            if (d) closedir(d);
            qsort(names, n, sizeof *names, by_name);
            for (size_t i = 0; i < n; ++i) check(names[i], engine, run_n), free(names[i]);
            free(names);
        } else {
            check(argv[a], engine, run_n);
        }
    }
    return 0;
}

/* dyngraph's C API: load a compiled partition saved from Python
 * (CompiledPartition.save) and run it at any shape, without Python.
 *
 * C99. Objects are opaque handles; every call that can fail returns a
 * dg_status, and dg_last_error() gives the message of the last failure on the
 * calling thread. A partition may be used from several threads (its calls are
 * serialized by the partition). docs/guide/c-api.md is the guide.
 */
#ifndef DYNGRAPH_H
#define DYNGRAPH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DG_API __attribute__((visibility("default")))
#else
#define DG_API
#endif

#define DG_VERSION_MAJOR 0
#define DG_VERSION_MINOR 1
#define DG_VERSION_PATCH 0

#define DG_MAX_NDIMS 6
/* A dimension whose value is only known at run time (see dg_dim). */
#define DG_DIM_DYNAMIC INT64_C(-1)

typedef struct dg_partition dg_partition;

typedef enum {
    DG_OK = 0,
    DG_ERR_INVALID,       /* a bad argument: a null pointer, an index out of range, an unknown engine string */
    DG_ERR_IR,            /* a file refused: its header, checksum or IR (dyngraph.IRError) */
    DG_ERR_SHAPE,         /* shapes that do not fit the partition (dyngraph.ShapeError) */
    DG_ERR_EXECUTION,     /* execution failed (dyngraph.ExecutionError) */
    DG_ERR_DEVICE,        /* a device or RPC server failed or is missing (dyngraph.DeviceError) */
    DG_ERR_OUT_OF_MEMORY, /* an allocation failed */
    DG_ERR_DTYPE,         /* a data type that does not fit (dyngraph.DTypeError) */
    DG_ERR_COMPILE,       /* the partition cannot be made for this engine (dyngraph.CompileError) */
    DG_ERR_INTERNAL       /* anything else (a bug: please report it) */
} dg_status;

/* The IR's codes (dyngraph.fb.DataType). */
typedef enum {
    DG_F32 = 0,
    DG_F16 = 1,
    DG_BF16 = 2, /* data: the 16-bit patterns */
    DG_I32 = 3,
    DG_I64 = 4,
    DG_BOOL = 5, /* one byte per element, 0 or 1 */
    DG_U8 = 6,
    DG_S8 = 7,
    DG_S4 = 8, /* one byte per element */
    DG_U4 = 9,
    DG_F8_E4M3 = 10, /* data: the 8-bit patterns */
    DG_F8_E5M2 = 11
} dg_dtype;

/* A tensor: its id in the partition, dtype and dimensions (row-major, contiguous data).
 * Descriptions read from a partition (dg_partition_input) have DG_DIM_DYNAMIC where a
 * dimension is dynamic; the ones passed to infer/execute are concrete. */
typedef struct {
    int64_t id;
    dg_dtype dtype;
    int32_t ndims;
    int64_t dims[DG_MAX_NDIMS];
} dg_desc;

/* One dimension of a port, symbolically. Strings belong to the partition. */
typedef struct {
    int64_t value;      /* its value when static, else DG_DIM_DYNAMIC */
    int32_t symbol;     /* the symbol (dg_partition_symbol) when the dimension is exactly one symbol, else -1 */
    const char *expr;   /* the dimension as an expression: "4", "batch", "seq + 1" */
    int64_t min, max;   /* the values it can take (from the symbols' ranges; max INT64_MAX when unbounded) */
} dg_dim;

typedef struct {
    uint64_t hits, misses, evictions, executions;
    uint64_t entries, capacity;    /* graphs cached, and at most */
    double build_seconds;          /* spent building graphs */
    uint64_t constant_bytes, state_bytes, arena_bytes;
} dg_cache_info;

/* "0.1.0" */
DG_API const char *dg_version(void);

/* The message of the last call that failed on this thread ("" if none). Valid until the
 * next failing call on this thread. */
DG_API const char *dg_last_error(void);

/* Name of a status code ("DG_ERR_SHAPE"). */
DG_API const char *dg_status_name(dg_status s);

/* Bytes per element of a dtype (0 for an unknown one). */
DG_API size_t dg_dtype_size(dg_dtype t);

/* Load a partition saved with CompiledPartition.save. The file is untrusted input: its header,
 * checksum and IR are checked (DG_ERR_IR). `engine` (NULL: "cpu"):
 *   "cpu"                   the host CPU, DYNGRAPH_NUM_THREADS threads (default: the usable cores, at most 8)
 *   "cpu:N"                 the host CPU with N threads
 *   "rpc:host:port[,...]"   the devices of ggml RPC servers (dyngraph rpc-server), split by layer
 *   "gpu", "gpu:NAME"       the first GPU ggml was built with, or the one named (e.g. "gpu:CUDA1")
 * On the CPU the weights are used in place in the memory-mapped file: it must stay unchanged
 * while the partition lives. */
DG_API dg_status dg_partition_load(const char *path, const char *engine, dg_partition **out);

/* The same, from a file's bytes in memory (copied: the buffer may be freed after the call). */
DG_API dg_status dg_partition_load_bytes(const void *data, size_t size, const char *engine, dg_partition **out);

/* Frees the partition (NULL: nothing). */
DG_API void dg_partition_destroy(dg_partition *p);

/* Ports. -1 for a NULL partition. */
DG_API int32_t dg_partition_num_inputs(const dg_partition *p);
DG_API int32_t dg_partition_num_outputs(const dg_partition *p);
DG_API int32_t dg_partition_num_states(const dg_partition *p);
DG_API int32_t dg_partition_num_symbols(const dg_partition *p);

/* Input i (execute order) as compiled: `symbolic_desc` has DG_DIM_DYNAMIC for dynamic dimensions;
 * `dims` (NULL, or DG_MAX_NDIMS entries) says what each dimension is; `name` (NULL or a pointer)
 * gets its name. Any of the three may be NULL. */
DG_API dg_status dg_partition_input(const dg_partition *p, int32_t i, dg_desc *symbolic_desc, dg_dim *dims,
                                    const char **name);
DG_API dg_status dg_partition_output(const dg_partition *p, int32_t i, dg_desc *symbolic_desc, dg_dim *dims,
                                     const char **name);
/* State tensor k (0 <= k < num_states): its shape is static. */
DG_API dg_status dg_partition_state(const dg_partition *p, int32_t k, dg_desc *desc, const char **name);
/* Symbol k: its name and range [min, max]. */
DG_API dg_status dg_partition_symbol(const dg_partition *p, int32_t k, const char **name, int64_t *min, int64_t *max);

/* Output descriptions for these concrete inputs (in execute order; ids as dg_partition_input
 * gives them). The graph for these shapes is built now if it is not cached, so the execute
 * that follows computes at once. A partition with an input whose values set dimensions (a
 * shape tensor) needs its data: use dg_partition_infer_outputs_data. */
DG_API dg_status dg_partition_infer_outputs(dg_partition *p, const dg_desc *in, int32_t n_in, dg_desc *out,
                                            int32_t n_out);
DG_API dg_status dg_partition_infer_outputs_data(dg_partition *p, const dg_desc *in, const void *const *in_data,
                                                 int32_t n_in, dg_desc *out, int32_t n_out);

/* Compute: inputs in execute order, outputs shaped as infer_outputs says, each buffer contiguous
 * with dg_desc's element count times dg_dtype_size bytes. Inputs are used in place. Nothing is
 * written (state included) when the arguments are refused. */
DG_API dg_status dg_partition_execute(dg_partition *p, const dg_desc *in, const void *const *in_data, int32_t n_in,
                                      const dg_desc *out, void *const *out_data, int32_t n_out);

/* State: every state tensor back to its initial value; a copy of state k's value into `dst`;
 * `src` as state k's value. `nbytes` must be the state's size. */
DG_API dg_status dg_partition_reset_state(dg_partition *p);
DG_API dg_status dg_partition_read_state(dg_partition *p, int32_t k, void *dst, size_t nbytes);
DG_API dg_status dg_partition_write_state(dg_partition *p, int32_t k, const void *src, size_t nbytes);

/* The graph cache (one ggml graph per binding of the dynamic dimensions). */
DG_API dg_status dg_partition_cache_info(const dg_partition *p, dg_cache_info *info);
DG_API dg_status dg_partition_set_cache_capacity(dg_partition *p, size_t capacity);
DG_API dg_status dg_partition_clear_cache(dg_partition *p);

#ifdef __cplusplus
}
#endif

#endif /* DYNGRAPH_H */

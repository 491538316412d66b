#include "rpc_caps.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "errors.h"
#include "ggml.h"

namespace dg::remote::caps {

namespace {

template <class T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put_tensor(std::string& out, const ggml_tensor* t) {
    put<uint32_t>(out, uint32_t(t->type));
    put<uint32_t>(out, uint32_t(t->op));
    for (int i = 0; i < 4; ++i) put<int64_t>(out, t->ne[i]);
    for (int i = 0; i < 4; ++i) put<uint64_t>(out, uint64_t(t->nb[i]));
    out.append(reinterpret_cast<const char*>(t->op_params), GGML_MAX_OP_PARAMS);
    put<int32_t>(out, t->flags);
}

struct Reader {
    const std::string& q;
    size_t at = 0;
    template <class T>
    T get(const char* what) {
        if (q.size() - at < sizeof(T)) throw std::invalid_argument(cat("the query ends inside ", what));
        T v;
        std::memcpy(&v, q.data() + at, sizeof(T));
        at += sizeof(T);
        return v;
    }
};

// One tensor of a node, checked and made in `ctx` (its data never allocated); `empty` is set for a tensor
// with no elements (ggml's debug builds assert on one: such a node is answered "no", unchecked).
ggml_tensor* read_tensor(Reader& r, ggml_context* ctx, uint32_t node, bool& empty) {
    const uint32_t type = r.get<uint32_t>("a tensor"), op = r.get<uint32_t>("a tensor");
    if (type >= GGML_TYPE_COUNT || ggml_blck_size(ggml_type(type)) <= 0 || ggml_type_size(ggml_type(type)) == 0)
        throw std::invalid_argument(cat("node ", node, ": type ", type, " is not one of ggml's"));
    if (op >= GGML_OP_COUNT) throw std::invalid_argument(cat("node ", node, ": op ", op, " is not one of ggml's"));
    int64_t ne[4];
    uint64_t nb[4];
    uint64_t elements = 1;
    for (int i = 0; i < 4; ++i) {
        ne[i] = r.get<int64_t>("a tensor");
        if (ne[i] < 0 || ne[i] > (int64_t(1) << 40))
            throw std::invalid_argument(cat("node ", node, ": a dimension of ", ne[i]));
        elements = ne[i] == 0 ? 0 : elements > (uint64_t(1) << 50) / uint64_t(ne[i]) ? ~uint64_t(0) : elements * uint64_t(ne[i]);
    }
    if (elements > (uint64_t(1) << 50)) throw std::invalid_argument(cat("node ", node, ": more than 2^50 elements"));
    if (ne[0] % ggml_blck_size(ggml_type(type)) != 0)
        throw std::invalid_argument(cat("node ", node, ": a row of ", ne[0], " is not whole blocks of ", ggml_type_name(ggml_type(type))));
    for (int i = 0; i < 4; ++i) {
        nb[i] = r.get<uint64_t>("a tensor");
        if (nb[i] > (uint64_t(1) << 56)) throw std::invalid_argument(cat("node ", node, ": a stride of ", nb[i]));
    }
    if (elements == 0) {
        empty = true;
        std::fill(ne, ne + 4, 1);
    }
    ggml_tensor* t = ggml_new_tensor(ctx, ggml_type(type), 4, ne);
    for (int i = 0; i < 4; ++i) t->nb[i] = size_t(nb[i]);
    t->op = ggml_op(op);
    if (r.q.size() - r.at < GGML_MAX_OP_PARAMS) throw std::invalid_argument("the query ends inside a tensor");
    std::memcpy(t->op_params, r.q.data() + r.at, GGML_MAX_OP_PARAMS);
    r.at += GGML_MAX_OP_PARAMS;
    t->flags = r.get<int32_t>("a tensor");
    return t;
}

}  // namespace

void encode_node(const ggml_tensor* t, std::string& out) {
    uint32_t mask = 0;
    for (int i = 0; i < GGML_MAX_SRC; ++i)
        if (t->src[i]) mask |= 1u << i;
    put<uint32_t>(out, mask);
    put_tensor(out, t);
    for (int i = 0; i < GGML_MAX_SRC; ++i)
        if (t->src[i]) put_tensor(out, t->src[i]);
}

std::string encode_query(uint32_t device, const std::vector<std::string>& nodes) {
    std::string q;
    put<uint32_t>(q, kMagic);
    put<uint32_t>(q, device);
    put<uint32_t>(q, uint32_t(nodes.size()));
    for (const std::string& n : nodes) q += n;
    return q;
}

std::string answer(const std::vector<ggml_backend_dev_t>& devs, const std::string& query, const std::vector<int>& refused) {
    if (query.size() > kMaxQueryBytes) throw std::invalid_argument(cat("a query of ", query.size(), " bytes"));
    Reader r{query};
    if (r.get<uint32_t>("its header") != kMagic) throw std::invalid_argument("not a query (no magic number)");
    const uint32_t device = r.get<uint32_t>("its header"), count = r.get<uint32_t>("its header");
    if (device >= devs.size()) throw std::invalid_argument(cat("device ", device, " of ", devs.size()));
    if (count > kMaxNodes) throw std::invalid_argument(cat(count, " nodes (at most ", kMaxNodes, ")"));
    const ggml_init_params params{ggml_tensor_overhead() * (1 + GGML_MAX_SRC), nullptr, true};
    std::unique_ptr<ggml_context, void (*)(ggml_context*)> ctx(ggml_init(params), ggml_free);
    if (!ctx) throw std::bad_alloc();
    std::string out;
    out.reserve(count);
    for (uint32_t n = 0; n < count; ++n) {
        ggml_reset(ctx.get());
        const uint32_t mask = r.get<uint32_t>("a node");
        if (mask >> GGML_MAX_SRC) throw std::invalid_argument(cat("node ", n, ": source mask ", mask));
        bool empty = false;
        ggml_tensor* t = read_tensor(r, ctx.get(), n, empty);
        for (int i = 0; i < GGML_MAX_SRC; ++i)
            if (mask >> i & 1) t->src[i] = read_tensor(r, ctx.get(), n, empty);
        // (ggml's checks read the first source of every op but ARANGE: a node without one is refused, not read)
        bool ok = !empty && t->op != GGML_OP_NONE && (t->src[0] != nullptr || t->op == GGML_OP_ARANGE);
        for (int op : refused)
            if (int(t->op) == op) ok = false;
        out.push_back(ok && ggml_backend_dev_supports_op(devs[device], t) ? 1 : 0);
    }
    if (r.at != query.size()) throw std::invalid_argument(cat(query.size() - r.at, " bytes after the last node"));
    return out;
}

}  // namespace dg::remote::caps

// oneDNN oracle for Dropout: a matmul [n,1]x[1,1] (weights 1) with the dropout
// attribute, seed/offset s64 and probability f32 as host scalars, the way oneDNN's
// graph backend maps the Dropout op (CPU rejects Dropout standalone and on eltwise).
// argv: n seed offset p; stdin: n f32; stdout: n f32 dst then n u8 mask.
#include <oneapi/dnnl/dnnl.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace dnnl;
int main(int argc, char** argv) {
  memory::dim n = atoll(argv[1]); int64_t seed = atoll(argv[2]), off = atoll(argv[3]); float p = atof(argv[4]);
  engine eng(engine::kind::cpu, 0); stream st(eng);
  memory::desc md({n, 1}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc mw({1, 1}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc mk({n, 1}, memory::data_type::u8, memory::format_tag::ab);
  primitive_attr attr; attr.set_dropout(mk, memory::data_type::s64, true, true);
  matmul::primitive_desc pd(eng, md, mw, md, attr); float one = 1.f;
  std::vector<float> x(n), y(n); std::vector<uint8_t> m(n, 7);
  if (fread(x.data(), 4, n, stdin) != (size_t)n) return 2;
  memory mw1(mw, eng, &one), mx(md, eng, x.data()), my(md, eng, y.data()), mm(mk, eng, m.data());
  memory ms(memory::desc::host_scalar(memory::data_type::s64), seed);
  memory mo(memory::desc::host_scalar(memory::data_type::s64), off);
  memory mp(memory::desc::host_scalar(memory::data_type::f32), p);
  matmul(pd).execute(st, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw1}, {DNNL_ARG_DST, my}, {DNNL_ARG_ATTR_DROPOUT_MASK, mm},
      {DNNL_ARG_ATTR_DROPOUT_SEED, ms}, {DNNL_ARG_ATTR_DROPOUT_OFFSET, mo}, {DNNL_ARG_ATTR_DROPOUT_PROBABILITY, mp}});
  st.wait();
  fwrite(y.data(), 4, n, stdout); fwrite(m.data(), 1, n, stdout);
}

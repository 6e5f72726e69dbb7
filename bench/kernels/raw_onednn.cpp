#include "kernels/raw_onednn.h"

namespace acc::bench {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

RawOnednnMatmul::RawOnednnMatmul(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, dt ab)
    : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  dnnl::memory::desc a({M, K}, ab, trans_a ? dims{1, M} : dims{K, 1});
  dnnl::memory::desc b({K, N}, ab, trans_b ? dims{1, K} : dims{N, 1});
  dnnl::memory::desc c({M, N}, dt::f32, dims{N, 1});
  pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine_);
  prim_ = dnnl::matmul(pd_);
}

void RawOnednnMatmul::run(void* a, void* b, float* c) {
  dnnl::memory am(pd_.src_desc(), engine_, a), bm(pd_.weights_desc(), engine_, b),
      cm(pd_.dst_desc(), engine_, c);
  prim_.execute(stream_, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream_.wait();
}

}  // namespace acc::bench

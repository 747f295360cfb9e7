// DeepSeek V4's ops are not on CUDA yet: each says so in one sentence, so a
// deepseek4 model on --backend cuda fails clearly instead of computing wrong.
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"

namespace ds4 {
namespace {
[[noreturn]] void not_yet(const char* op) {
    throw Error(std::string("the CUDA backend has no '") + op + "' op yet (DeepSeek V4); use --backend cpu.");
}
}  // namespace

void CudaBackend::rope_partial(Tensor&, int, int, const int32_t*, const RopeParams&, bool) { not_yet("rope_partial"); }
void CudaBackend::hc_mixes(const Tensor&, const WeightRef&, const WeightRef&, const HcParams&, Tensor&, Tensor*,
                           Tensor*) {
    not_yet("hc_mixes");
}
void CudaBackend::hc_collapse(const Tensor&, const Tensor&, Tensor&) { not_yet("hc_collapse"); }
void CudaBackend::hc_expand(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
    not_yet("hc_expand");
}
void CudaBackend::matmul_grouped(const WeightRef&, const Tensor&, Tensor&) { not_yet("matmul_grouped"); }
void CudaBackend::swiglu_clamp(const Tensor&, const Tensor&, float, Tensor&) { not_yet("swiglu_clamp"); }
void CudaBackend::compress_pool(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const int32_t*, int, bool,
                                Tensor&) {
    not_yet("compress_pool");
}
void CudaBackend::copy_rows(const Tensor&, const int32_t*, Tensor&, const int32_t*, int64_t) { not_yet("copy_rows"); }
RowLists CudaBackend::indexer_topk(const Tensor&, const Tensor&, const Tensor&, const int32_t*, int64_t) {
    not_yet("indexer_topk");
}
void CudaBackend::attention_window_sink(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, const Tensor*,
                                        const RowLists*, const WeightRef&, const AttentionParams&, Tensor&) {
    not_yet("attention_window_sink");
}

}  // namespace ds4

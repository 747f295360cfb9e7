// Routing and the routed-expert FFN on CUDA (both families).
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"

namespace ds4 {

Routing CudaBackend::route_sqrt_softplus(const Tensor&, const WeightRef*, const int32_t*, int, bool, float) {
    throw Error("the CUDA backend has no 'route_sqrt_softplus' op yet (DeepSeek V4); use --backend cpu.");
}
void CudaBackend::moe_swiglu_clamp(const Tensor&, const Routing&, const WeightRef&, const WeightRef&,
                                   const WeightRef&, float, Tensor&) {
    throw Error("the CUDA backend has no 'moe_swiglu_clamp' op yet (DeepSeek V4); use --backend cpu.");
}

}  // namespace ds4

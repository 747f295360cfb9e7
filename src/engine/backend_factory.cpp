#include "engine/backend_factory.h"

#include <algorithm>
#include <thread>

#include "common/error.h"
#ifdef DS4_HAVE_CUDA
// The only #ifdef on CUDA outside src/backend/cuda: this file is compiled
// with the CUDA backend linked in when the build has it.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#endif

namespace ds4 {

bool built_with_cuda() {
#ifdef DS4_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

std::vector<std::string> backend_names() {
    std::vector<std::string> names = {"auto", "cpu"};
    if (built_with_cuda()) names.push_back("cuda");
    return names;
}

namespace {

BackendChoice cpu_backend(const BackendOptions& o, const std::string& why) {
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return {make_cpu_backend(threads),
            "backend: cpu, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") + why +
                (o.int8_activations ? " (--int8-activations is a CUDA mode: the CPU stays exact)" : "")};
}

#ifdef DS4_HAVE_CUDA
BackendChoice cuda_backend(const BackendOptions& o, const std::string& why) {
    auto be = make_cuda_backend(CudaOptions{o.device, o.host_weights, o.int8_activations, !o.exact});
    return {std::move(be), "backend: cuda (device " + std::to_string(o.device) + ", " + cuda::device_name(o.device) +
                               (o.host_weights ? ", weights in page-locked host memory" : "") +
                               (o.int8_activations ? ", 8-bit decode activations" : "") +
                               (o.exact ? ", FP32 prefill (--exact)" : ", f16 tensor-core prefill") + ")" + why};
}
#endif

}  // namespace

BackendChoice make_backend(const BackendOptions& o) {
    if (o.name == "cpu") {
        if (o.host_weights) throw Error("--cuda-host-weights needs the CUDA backend.");
        return cpu_backend(o, "");
    }
    if (o.name == "cuda") {
#ifdef DS4_HAVE_CUDA
        return cuda_backend(o, "");
#else
        throw Error("this build has no CUDA backend (configure with -DDS4_CUDA=ON and nvcc); use --backend cpu.");
#endif
    }
    if (o.name == "auto") {
#ifdef DS4_HAVE_CUDA
        if (cuda::device_count() > 0) return cuda_backend(o, " (auto)");
        if (o.host_weights) throw Error("--cuda-host-weights needs a CUDA GPU, and this machine has none.");
        return cpu_backend(o, " (auto: no CUDA GPU on this machine)");
#else
        if (o.host_weights) throw Error("--cuda-host-weights needs the CUDA backend, which this build lacks.");
        return cpu_backend(o, " (auto: this build has no CUDA)");
#endif
    }
    std::string known;
    for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown backend '" + o.name + "'; this build has " + known + ".");
}

}  // namespace ds4

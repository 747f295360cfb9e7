// CUDA device discovery.
#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/cuda_device.h"

namespace ds4::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error for later calls
        return 0;
    }
    return n;
}

std::string device_name(int index) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "unknown";
    return prop.name;
}

}  // namespace ds4::cuda

// Turns a failed CUDA runtime or cuBLAS call into one ds4::Error sentence.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace ds4::cuda {

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(e) + ".");
}

inline void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw Error(std::string("cuBLAS: ") + what + " failed with status " + std::to_string(int(s)) + ".");
}

// After a kernel launch: reports a bad launch configuration at once (errors
// inside the kernel surface at the next synchronising call).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace ds4::cuda

// cuBLAS, loaded when the first CUDA backend is made rather than when a
// program starts. Linked the usual way, libcublas pulls in libcublasLt
// (540 MB), whose static constructors cost every process ~0.35 s before
// main(), CPU runs and `ds4 --help` included (measured on the 2-core CI
// machine: the test suites start `ds4` thousands of times). The CUDA
// backend is the only user and calls seven functions; they are taken from
// the library by name once, with the header's own types.
#pragma once

#include <cublas_v2.h>

namespace ds4::cuda {

struct CublasLibrary {
    decltype(&cublasCreate) create = nullptr;
    decltype(&cublasDestroy) destroy = nullptr;
    decltype(&cublasSetStream) set_stream = nullptr;
    decltype(&cublasSetMathMode) set_math_mode = nullptr;
    decltype(&cublasSgemm) sgemm = nullptr;
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
    decltype(&cublasSgemmGroupedBatched) sgemm_grouped_batched = nullptr;
};

// The loaded library (first call loads it; thread-safe). Throws ds4::Error
// with one sentence when libcublas cannot be opened or lacks a function.
const CublasLibrary& cublas();

}  // namespace ds4::cuda

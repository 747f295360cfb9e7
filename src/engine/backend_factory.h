// The one place that knows which backends this build has: programs ask for
// a backend by name and never include a backend's own header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace ds4 {

struct BackendOptions {
    std::string name = "auto";  // "auto", "cpu" or "cuda"
    int threads = 0;            // CPU worker threads; 0: one per core
    int device = 0;             // CUDA device index
    // CUDA reads the weights from the mapped file, page-locked, instead of
    // copying them to the device (--cuda-host-weights).
    bool host_weights = false;
    // CUDA decode products on activations rounded to 8 bits per block of 32,
    // as llama.cpp's CUDA backend (--int8-activations); the CPU is always
    // exact. Off by default until its error is measured against llama.cpp's
    // on the same files (issue 13).
    bool int8_activations = false;
    // CUDA prefill products in FP32 (weights decoded to float, cuBLAS SGEMM:
    // the CPU's results to float rounding) instead of f16 tensor cores
    // (--exact). The CPU is always exact.
    bool exact = false;
};

// The names make_backend() accepts: "auto", "cpu" and, in a CUDA build, "cuda".
std::vector<std::string> backend_names();

// Whether this build has the CUDA backend (a GPU may still be missing).
bool built_with_cuda();

struct BackendChoice {
    std::unique_ptr<Backend> backend;
    // One line for the startup log, naming what was chosen and, for "auto",
    // why: "backend: cuda (device 0, NVIDIA H200)", "backend: cpu, 16 threads
    // (auto: this build has no CUDA)".
    std::string description;
};

// "auto" picks CUDA when the build has it and a GPU is present, else the
// CPU. Throws ds4::Error with one sentence for an unknown name, "cuda" in a
// build without it, or no usable GPU.
BackendChoice make_backend(const BackendOptions& options);

}  // namespace ds4

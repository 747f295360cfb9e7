#include "backend/cuda/cublas_library.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "common/error.h"

namespace ds4::cuda {
namespace {

// cublasSgemm etc. are macros for the versioned symbols (cublasSgemm_v2):
// two steps so the macro expands before it is quoted.
#define DS4_QUOTE_(x) #x
#define DS4_QUOTE(x) DS4_QUOTE_(x)

const std::string kSoname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

// The loader's search path first (LD_LIBRARY_PATH, the program's RUNPATH:
// the toolkit's lib directory in a build tree), then beside the CUDA
// runtime this program was linked with, where the toolkit keeps cuBLAS.
void* open_library(std::string& tried) {
    if (void* h = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    tried = dlerror();
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) && info.dli_fname) {
        const auto beside = std::filesystem::path(info.dli_fname).parent_path() / kSoname;
        if (void* h = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
        tried += "; " + std::string(dlerror());
    }
    return nullptr;
}

template <class F>
void take(void* lib, F& f, const char* symbol) {
    f = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!f) throw Error("the CUDA backend needs cuBLAS's " + std::string(symbol) + ", which " + kSoname + " lacks.");
}

CublasLibrary load() {
    std::string tried;
    void* lib = open_library(tried);
    if (!lib) throw Error("the CUDA backend needs cuBLAS, and " + kSoname + " cannot be loaded (" + tried + ").");
    // Never closed: kernels and handles may outlive any one backend.
    CublasLibrary c;
    take(lib, c.create, DS4_QUOTE(cublasCreate));
    take(lib, c.destroy, DS4_QUOTE(cublasDestroy));
    take(lib, c.set_stream, DS4_QUOTE(cublasSetStream));
    take(lib, c.set_math_mode, DS4_QUOTE(cublasSetMathMode));
    take(lib, c.sgemm, DS4_QUOTE(cublasSgemm));
    take(lib, c.sgemm_strided_batched, DS4_QUOTE(cublasSgemmStridedBatched));
    take(lib, c.sgemm_grouped_batched, DS4_QUOTE(cublasSgemmGroupedBatched));
    return c;
}

}  // namespace

const CublasLibrary& cublas() {
    static const CublasLibrary library = load();
    return library;
}

}  // namespace ds4::cuda

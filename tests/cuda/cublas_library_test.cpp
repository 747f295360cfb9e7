// cuBLAS is opened when the CUDA backend is made, not linked into the
// programs (backend/cuda/cublas_library.h): these run without a GPU, in CI.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cuda/cublas_library.h"

namespace {

namespace fs = std::filesystem;

TEST(CublasLibrary, OpensAndFindsEveryFunction) {
    const ds4::cuda::CublasLibrary& c = ds4::cuda::cublas();
    EXPECT_NE(c.create, nullptr);
    EXPECT_NE(c.destroy, nullptr);
    EXPECT_NE(c.set_stream, nullptr);
    EXPECT_NE(c.set_math_mode, nullptr);
    EXPECT_NE(c.sgemm, nullptr);
    EXPECT_NE(c.sgemm_strided_batched, nullptr);
    EXPECT_NE(c.sgemm_grouped_batched, nullptr);
    // Loaded once: the same table every time.
    EXPECT_EQ(&ds4::cuda::cublas(), &c);
}

// A program's DT_NEEDED libraries, as readelf prints them.
std::vector<std::string> needed(const fs::path& program) {
    const std::string cmd = "readelf -d '" + program.string() + "' 2>&1";
    std::vector<std::string> libs;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return libs;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        const std::string l = line;
        if (l.find("(NEEDED)") == std::string::npos) continue;
        const size_t a = l.find('['), b = l.find(']');
        if (a != std::string::npos && b > a) libs.push_back(l.substr(a + 1, b - a - 1));
    }
    pclose(p);
    return libs;
}

// Linked, libcublasLt's constructors cost every start ~0.35 s (a CPU run,
// `ds4 --help`, each of the thousands of runs the test suites make).
TEST(CublasLibrary, NoProgramLinksIt) {
    for (const char* name : {"ds4", "ds4-server", "ds4-bench", "ds4-gguf"}) {
        const fs::path program = fs::path(DS4_BINARY_DIR) / name;
        ASSERT_TRUE(fs::exists(program)) << program;
        const std::vector<std::string> libs = needed(program);
        ASSERT_FALSE(libs.empty()) << "readelf found no NEEDED entries in " << program;
        bool cudart = false;
        for (const auto& lib : libs) {
            EXPECT_EQ(lib.find("libcublas"), std::string::npos) << name << " links " << lib;
            cudart = cudart || lib.find("libcudart") != std::string::npos;
        }
        // The CUDA runtime stays linked where the backend is (the programs
        // that open a model): this is a CUDA build's program, not a CPU one.
        if (std::string(name) != "ds4-gguf") EXPECT_TRUE(cudart) << name << " links no libcudart";
    }
}

}  // namespace

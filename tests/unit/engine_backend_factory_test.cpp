// The backend factory: names, the "auto" choice and its startup line, and
// one clear sentence for every backend this build or machine cannot give.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "engine/backend_factory.h"

namespace ds4 {
namespace {

std::string error_of(const BackendOptions& o) {
    try {
        make_backend(o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(BackendFactory, NamesFollowTheBuild) {
    const auto names = backend_names();
    EXPECT_EQ(names.front(), "auto");
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
    EXPECT_EQ(std::find(names.begin(), names.end(), "cuda") != names.end(), built_with_cuda());
}

TEST(BackendFactory, CpuSaysHowManyThreads) {
    BackendOptions o;
    o.name = "cpu";
    o.threads = 3;
    const BackendChoice c = make_backend(o);
    ASSERT_TRUE(c.backend);
    EXPECT_EQ(c.backend->name(), "cpu");
    EXPECT_EQ(c.description, "backend: cpu, 3 threads");
}

TEST(BackendFactory, AutoNamesItsChoiceAndWhy) {
    BackendOptions o;  // "auto"
    o.threads = 1;
    const BackendChoice c = make_backend(o);
    ASSERT_TRUE(c.backend);
    EXPECT_EQ(c.description.rfind("backend: " + c.backend->name(), 0), 0u) << c.description;
    EXPECT_NE(c.description.find("auto"), std::string::npos) << c.description;
    if (!built_with_cuda()) {
        EXPECT_EQ(c.backend->name(), "cpu");
        EXPECT_NE(c.description.find("no CUDA"), std::string::npos) << c.description;
    }
}

TEST(BackendFactory, UnavailableBackendsAreOneSentence) {
    BackendOptions o;
    o.name = "tpu";
    std::string msg = error_of(o);
    EXPECT_NE(msg.find("'tpu'"), std::string::npos) << msg;
    for (const auto& n : backend_names()) EXPECT_NE(msg.find(n), std::string::npos) << msg;

    o.name = "cpu";
    o.host_weights = true;
    msg = error_of(o);
    EXPECT_NE(msg.find("--cuda-host-weights"), std::string::npos) << msg;

    // CUDA: the backend in a build and on a machine that have it, else a sentence saying which is missing.
    o = BackendOptions{};
    o.name = "cuda";
    try {
        const BackendChoice c = make_backend(o);
        EXPECT_TRUE(built_with_cuda());
        EXPECT_EQ(c.backend->name(), "cuda");
        EXPECT_EQ(c.description.rfind("backend: cuda (device 0, ", 0), 0u) << c.description;
    } catch (const Error& e) {
        msg = e.what();
        EXPECT_EQ(msg.find('\n'), std::string::npos);
        EXPECT_NE(msg.find(built_with_cuda() ? "GPU" : "-DDS4_CUDA=ON"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace ds4

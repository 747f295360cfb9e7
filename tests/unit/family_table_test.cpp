// The family tables agree: every architecture the loader knows has a synth
// entry whose presets name it and build a model that architecture's loader
// accepts; the chat table's renderer names are unique, and each one renders.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "chat/chat_family.h"
#include "common/error.h"
#include "models/family.h"
#include "synth/bench_preset.h"
#include "synth/synth_family.h"

namespace ds4 {
namespace {

TEST(FamilyTable, EveryLoadableArchitectureHasASynthEntry) {
    const auto archs = supported_architectures();
    ASSERT_FALSE(archs.empty());
    for (const std::string& arch : archs) {
        const SynthFamily& f = synth_family(arch);
        EXPECT_EQ(f.arch, arch);
        const auto presets = f.bench_presets();
        EXPECT_FALSE(presets.empty()) << arch;
        for (const SyntheticPreset& p : presets) {
            EXPECT_EQ(p.arch, arch) << p.name;
            EXPECT_GT(p.n_layer, 0) << p.name;
            EXPECT_EQ(synthetic_preset(p.name).name, p.name);
        }
    }
    EXPECT_EQ(synth_families().size(), archs.size()) << "a synth entry for an architecture the loader lacks";
    EXPECT_THROW(synth_family("llama"), UsageError);
}

TEST(FamilyTable, ChatRendererNamesAreUniqueAndRender) {
    std::set<std::string> seen;
    for (const ChatFamily* f : chat_families()) {
        EXPECT_FALSE(f->renderers.empty()) << f->family;
        EXPECT_EQ(f->detect(""), "") << f->family << " claims an empty template";
        for (const ChatRenderer& r : f->renderers) {
            EXPECT_TRUE(seen.insert(std::string(r.name)).second) << r.name << " twice";
            const std::string text = render_chat(r.name, {{"user", "hi"}}, ChatOptions{});
            EXPECT_NE(text.find("hi"), std::string::npos) << r.name;
        }
    }
    EXPECT_EQ(seen.size(), chat_template_names().size());
}

}  // namespace
}  // namespace ds4

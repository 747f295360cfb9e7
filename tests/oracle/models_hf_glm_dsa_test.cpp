// GLM-5.x (glm-dsa): ds4 against Hugging Face transformers' own GLM-MoE-DSA
// implementation (transformers 5.17 `glm_moe_dsa`, run in float64), the
// second reference the GLM-5 issue asks for next to llama.cpp.
// transformers is not installed on this machine, so its logits are committed
// fixtures: tests/fixtures/hf_glm_dsa/make_fixtures.py built three tiny
// random models with GlmMoeDsaConfig / GlmMoeDsaForCausalLM, ran them on
// fixed token ids and wrote the weights as GGUF the way llama.cpp's
// converter does for glm-dsa (all F32). README.md there has the command,
// versions and seeds.
//
//   lead1_groups_topk32          3 blocks (block 0 dense), 8 experts / 3
//                                used in 4 groups of which 2 are used, scale
//                                2.5, normalised weights, indexer top-32,
//                                300 tokens
//   shared_indexer_shexp2        4 blocks (block 0 dense), indexer types
//                                full/shared/full/shared, 2 shared experts,
//                                no groups, unnormalised unscaled weights,
//                                RoPE base 1e6, top-20, 260 tokens
//   moe_only_wide_rope_groups8   2 MoE blocks, 16 experts / 4 used in 8
//                                groups of which 3 are used, decoupled RoPE
//                                32 wide beside 8 nope dims, top-48, 320 tokens
//
// Every fixture runs well past its indexer's top-k, so the sparse selection
// changes the logits, with a routing bias that changes expert choices. Bar:
// relative L2 <= 1e-5 per position and the same argmax at every position, at
// --prefill-chunk 1, 16, a fresh random chunk and the whole prompt, on a
// fresh random prefix of the fixture's tokens. make_fixtures.py kept only
// seeds whose every top-k choice (indexer and router, in a float64 replay)
// is decided by more than float32 rounding, so a float32 engine can be held
// to the same selections. The fixtures' JSON also records whether
// transformers computes llama.cpp's glm-dsa semantics (interleaved RoPE on
// latent attention and indexer, ReLU in the indexer) and, if not, which
// convention it uses instead.
#include <array>

#include "hf_fixture.h"

namespace ds4::oracle {
namespace {

const fs::path kFixtures = fs::path(DS4_SOURCE_DIR) / "tests" / "fixtures" / "hf_glm_dsa";
constexpr Tolerance kHfTolerance{1e-5, 1.0};
const std::array<const char*, 3> kNames = {"lead1_groups_topk32", "shared_indexer_shexp2", "moe_only_wide_rope_groups8"};

// A fresh prefix, never shorter than twice the indexer's top-k (so most
// positions choose among more past positions than they may keep).
std::vector<int32_t> random_prefix(const HfFixture& f, std::mt19937_64& rng) {
    const size_t topk = f.meta.at("config").at("index_topk").get<size_t>();
    const size_t lo = std::min(f.ids.size(), 2 * topk + 16);
    const size_t n = std::uniform_int_distribution<size_t>(lo, f.ids.size())(rng);
    return {f.ids.begin(), f.ids.begin() + ptrdiff_t(n)};
}

class HfGlmDsa : public HfFixtureTest {};

TEST_P(HfGlmDsa, Ds4MatchesTransformersFloat64AtEveryChunk) {
    const HfFixture f = load_hf_fixture(kFixtures, GetParam());
    const std::vector<int32_t> ids = random_prefix(f, rng_);
    const size_t n = ids.size();
    const Logits ref = first_rows(f.hf, n);
    const int random_chunk = std::uniform_int_distribution<int>(2, int(n))(rng_);
    for (int chunk : {1, 16, random_chunk, int(n)}) {
        SCOPED_TRACE("--prefill-chunk " + std::to_string(chunk) + ", first " + std::to_string(n) + " of " +
                     std::to_string(f.ids.size()) + " fixture tokens");
        const Logits ours = engine_logits(Engine::ds4, f.model, ids, f.n_vocab, dir_.path(), {2, chunk});
        EXPECT_TRUE(logits_match(ours, ref, kHfTolerance, "ds4 (chunk " + std::to_string(chunk) + ") vs transformers"));
        EXPECT_TRUE(same_argmax(ours, ref));
    }
}

// The logits must be transformers' own: make_fixtures.py --numpy-only writes
// its own numpy replay instead (for testing the script), which is no oracle.
TEST_P(HfGlmDsa, FixtureLogitsComeFromTransformers) {
    const nlohmann::json meta = read_fixture_json(kFixtures, GetParam());
    const std::string reference = meta.at("checks").at("reference").get<std::string>();
    EXPECT_EQ(reference.rfind("transformers", 0), 0u) << GetParam() << ".json: the logits come from " << reference;
    ASSERT_TRUE(meta.at("versions").contains("transformers")) << GetParam() << ".json records no transformers version";
    EXPECT_EQ(meta.at("n_tokens").get<size_t>(), read_token_ids(kFixtures / (GetParam() + ".ids")).size());
}

// The integrity check itself fails for a changed byte, in each kind of file.
TEST_P(HfGlmDsa, FixtureIntegrityCheckSeesOneChangedByte) {
    expect_integrity_check_sees_one_changed_byte(kFixtures, GetParam(), dir_.path(), rng_);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfGlmDsa, ::testing::Values(kNames[0], kNames[1], kNames[2]));

// The third engine: if this fails while ds4 passes, the fixture's GGUF layout
// (or transformers' semantics) is suspect, not ds4. Its indexer keys are 64
// wide, the smallest Hadamard rotation llama.cpp's DSA cache has.
TEST(HfGlmDsaLlama, LlamaCppMatchesTransformersOnEveryFixture) {
    const uint64_t seed = fresh_seed();
    std::mt19937_64 rng(seed);
    SCOPED_TRACE(ds4::test::seed_note(seed));
    for (const char* name : kNames) {
        SCOPED_TRACE(name);
        const HfFixture f = load_hf_fixture(kFixtures, name);
        const std::vector<int32_t> ids = random_prefix(f, rng);
        TempDir dir;
        const Logits ref = first_rows(f.hf, ids.size());
        const Logits llama = engine_logits(Engine::llama, f.model, ids, f.n_vocab, dir.path());
        EXPECT_TRUE(logits_match(llama, ref, kHfTolerance, std::string("llama.cpp vs transformers, ") + name));
        EXPECT_TRUE(same_argmax(llama, ref));
    }
}

}  // namespace
}  // namespace ds4::oracle

// `ds4-gguf pack`, judged by llama.cpp's GGUF reader (ggml's gguf.cpp, not
// ours): for a fresh random qwen3moe and deepseek4 model (weight types drawn
// each run), every (block, expert) record of the pack holds exactly the
// bytes of that expert's gate, up and down matrices (and per-expert scales)
// at the offsets ggml computes for the tensors, each record and each part
// where the format puts them (4 KiB records, 256-byte parts, zero padding),
// the pack holds every routed expert tensor of the file and nothing else,
// and the GGUF is byte for byte what it was (llama.cpp still loads it: it
// is the same file).
#include <gguf.h>
#include <xxhash.h>

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "experts/expert_pack.h"
#include "oracle_ggml_ptr.h"
#include "oracle_harness.h"

namespace ds4::oracle {
namespace {

// A routed expert tensor as ggml sees it: absolute offset, bytes, experts.
struct GgmlTensor {
    uint64_t offset = 0, bytes = 0;
    int64_t n_expert = 0;
};

std::map<std::string, GgmlTensor> ggml_expert_tensors(const fs::path& path) {
    ggml_context* meta = nullptr;
    gguf_init_params params{/*no_alloc=*/true, &meta};
    GgufPtr g(gguf_init_from_file(path.c_str(), params));
    GgmlPtr meta_owner(meta);
    if (!g) throw std::runtime_error("ggml cannot read GGUF file " + path.string());
    std::map<std::string, GgmlTensor> out;
    for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
        const std::string name = gguf_get_tensor_name(g.get(), i);
        if (name.rfind("blk.", 0) != 0 || name.find("_exps.") == std::string::npos) continue;
        const ggml_tensor* t = ggml_get_tensor(meta, name.c_str());
        GgmlTensor x;
        x.offset = gguf_get_data_offset(g.get()) + gguf_get_tensor_offset(g.get(), i);
        x.bytes = gguf_get_tensor_size(g.get(), i);
        x.n_expert = name.ends_with(".weight") ? t->ne[2] : t->ne[0];
        out[name] = x;
    }
    return out;
}

std::vector<uint8_t> slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void check_pack(const std::string& arch, const std::vector<std::string>& synth_flags, uint64_t seed) {
    TempDir dir;
    const fs::path model = dir.path() / (arch + ".gguf"), pack = dir.path() / (arch + ".pack");
    std::vector<std::string> argv = {ds4_program("ds4-gguf").string(), "synth", "--arch", arch, "--preset", "tiny",
                                     "--no-tokenizer", "--seed", std::to_string(seed), "--out", model.string()};
    argv.insert(argv.end(), synth_flags.begin(), synth_flags.end());
    run_checked(argv);
    const std::vector<uint8_t> gguf = slurp(model);
    run_checked({ds4_program("ds4-gguf").string(), "pack", model.string(), pack.string()});
    ASSERT_EQ(slurp(model), gguf) << "packing changed the model file";

    const auto tensors = ggml_expert_tensors(model);
    const std::vector<uint8_t> bytes = slurp(pack);
    const ExpertPack p = ExpertPack::open(pack.string());
    const PackLayout& l = p.layout();
    ASSERT_EQ(l.file_bytes, bytes.size());
    ASSERT_EQ(l.header_bytes % 4096, 0u);
    // Every routed expert tensor of the file is in the pack once (scales of
    // one value for all experts stay in the GGUF).
    size_t parts = 0, expected_parts = 0;
    for (const auto& [name, t] : tensors) expected_parts += t.n_expert > 1 || name.ends_with(".weight");
    uint64_t next_record = l.header_bytes;
    for (const PackBlock& b : l.blocks) {
        SCOPED_TRACE("block " + std::to_string(b.layer));
        ASSERT_EQ(b.first_record, next_record) << "records are not back to back";
        ASSERT_EQ(b.record_bytes % 4096, 0u);
        next_record += uint64_t(b.n_expert) * b.record_bytes;
        for (const PackPartLayout& part : b.parts) {
            ++parts;
            ASSERT_EQ(part.tensor.rfind("blk." + std::to_string(b.layer) + ".", 0), 0u) << part.tensor;
            const auto it = tensors.find(part.tensor);
            ASSERT_NE(it, tensors.end()) << part.tensor << " is not a routed expert tensor of the file";
            const GgmlTensor& t = it->second;
            ASSERT_EQ(t.n_expert, b.n_expert) << part.tensor;
            ASSERT_EQ(part.bytes * uint64_t(b.n_expert), t.bytes) << part.tensor;
            ASSERT_EQ(part.offset % 256, 0u);
        }
        for (int64_t e = 0; e < b.n_expert; ++e) {
            const uint64_t at = b.record_offset(e);
            ASSERT_EQ(at % 4096, 0u);
            std::vector<bool> covered(b.record_bytes, false);
            for (const PackPartLayout& part : b.parts) {
                const GgmlTensor& t = tensors.at(part.tensor);
                const uint8_t* want = gguf.data() + t.offset + uint64_t(e) * part.bytes;
                ASSERT_EQ(std::memcmp(bytes.data() + at + part.offset, want, part.bytes), 0)
                    << "expert " << e << "'s " << part.tensor << " differs from the GGUF's bytes";
                for (uint64_t i = part.offset; i < part.offset + part.bytes; ++i) {
                    ASSERT_FALSE(covered[i]) << "parts overlap";
                    covered[i] = true;
                }
            }
            for (uint64_t i = 0; i < b.record_bytes; ++i)
                if (!covered[i]) ASSERT_EQ(bytes[at + i], 0) << "padding of expert " << e << " is not zero";
            ASSERT_TRUE(p.record_intact(b, e, bytes.data() + at));
        }
    }
    EXPECT_EQ(parts, expected_parts) << "the pack does not hold every routed expert tensor";
    EXPECT_EQ(next_record, l.records_end);
}

TEST(ExpertPack, QwenRecordsAreTheGgufBytes) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const char* types[] = {"f32", "f16", "bf16", "q8_0", "q4_k_m"};
    const std::string type = types[rng() % 5];
    SCOPED_TRACE("--type " + type);
    check_pack("qwen3moe", {"--type", type}, rng());
}

TEST(ExpertPack, DeepSeek4RecordsAreTheGgufBytes) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const char* quants[] = {"f32", "q2", "q4"};
    const std::string quant = quants[rng() % 3];
    SCOPED_TRACE("--quant " + quant);
    check_pack("deepseek4", {"--quant", quant}, rng());
}

}  // namespace
}  // namespace ds4::oracle

// ModelMap over real files: region counts for the layouts that matter (a
// layer-slice file, a whole model, half a model, interleaved layers, random
// layouts), the summary line, and the mappings the kernel actually holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "mapping_test_file.h"
#include "support/test_seed.h"

using namespace ds4;
using namespace mapping_test;

namespace {

uint64_t fresh_seed() { return ds4::test::test_seed(); }

uint64_t rand_in(std::mt19937_64& rng, uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); }

// A llama.cpp-ordered model: token_embd, then the layers, then the head.
// Experts are big (several times max_gap, as in real files), the rest small.
std::vector<TensorSpec> model_specs(int layer_begin, int layer_end, bool embedding, bool head, std::mt19937_64& rng) {
    const uint64_t g = region_max_gap();
    std::vector<TensorSpec> specs;
    if (embedding) specs.push_back({"token_embd.weight", rand_in(rng, g, 3 * g)});
    for (int l = layer_begin; l < layer_end; ++l)
        for (const std::string& n : layer_tensor_names(l))
            specs.push_back({n, is_expert_name(n) ? rand_in(rng, 2 * g, 4 * g) : rand_in(rng, 1, g / 4)});
    if (head) {
        specs.push_back({"output_norm.weight", rand_in(rng, 1, 4096)});
        specs.push_back({"output.weight", rand_in(rng, g, 3 * g)});
    }
    return specs;
}

std::string expected_summary(size_t regions, size_t spans, uint64_t mapped, uint64_t file_size) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "model map: %zu region%s across %zu tensor spans (%.2f GiB of %.2f GiB file)", regions,
                  regions == 1 ? "" : "s", spans, mapped / 1073741824.0, file_size / 1073741824.0);
    return buf;
}

// Bytes of every tensor, through the map, equal the file's bytes read with pread.
void expect_tensor_bytes(ModelMap& map, const WrittenFile& wf) {
    for (const PlacedTensor& t : wf.tensors) {
        if (t.nbytes == 0) continue;
        const uint8_t* p = map.tensor_data(t.name);
        ASSERT_NE(p, nullptr) << t.name;
        const auto want = pread_bytes(wf.path, t.file_offset, t.nbytes);
        ASSERT_EQ(0, std::memcmp(p, want.data(), t.nbytes)) << t.name;
    }
}

}  // namespace

TEST(MappingModelMap, LayerSliceFileIsOneRegion) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    // What a pipeline stage's own file holds: layers 30..38 and the head,
    // 9 * 17 + 3 = 156 tensors.
    auto specs = model_specs(30, 39, false, true, rng);
    specs.insert(specs.begin(), TensorSpec{"rope_freqs.weight", 256});
    ASSERT_EQ(specs.size(), 156u);
    const WrittenFile wf = write_gguf(dir.file("slice.gguf"), specs, rng);
    auto file = GgufFile::open(wf.path);

    MapSelection sel;
    sel.layers.begin = 30;
    sel.embedding = false;
    const int before = mappings_of(wf.path);
    auto map = ModelMap::build(*file, sel);
    EXPECT_EQ(mappings_of(wf.path) - before, 1) << "one region must be one mmap";
    ASSERT_EQ(map->regions().size(), 1u);
    EXPECT_EQ(map->span_count(), 156u);
    EXPECT_EQ(map->regions()[0].tensors.size(), 156u);
    const uint64_t first = wf.tensors.front().file_offset;
    const uint64_t last_end = wf.tensors.back().file_offset + wf.tensors.back().nbytes;
    EXPECT_EQ(map->regions()[0].begin, first);
    EXPECT_EQ(map->regions()[0].end, last_end);
    EXPECT_EQ(map->mapped_bytes(), last_end - first);
    EXPECT_EQ(map->summary(), expected_summary(1, 156, last_end - first, std::filesystem::file_size(wf.path)));
    EXPECT_EQ(map->exact_view_count(), 0u);
    expect_tensor_bytes(*map, wf);
    EXPECT_EQ(map->exact_view_count(), 0u) << "every tensor lies in the region";
}

TEST(MappingModelMap, FullModelIsOneRegionAndOneMmap) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    // Padding between tensors must never split a region, even when the
    // alignment (and so the padding) is larger than region_max_gap().
    for (const uint64_t alignment : {uint64_t{32}, uint64_t{32} << rng() % 12, uint64_t{1} << 20}) {
        SCOPED_TRACE("alignment " + std::to_string(alignment));
        const int layers = alignment > 65536 ? 2 : 8;  // keep the padded file small
        const WrittenFile wf = write_gguf(dir.file("full" + std::to_string(alignment) + ".gguf"),
                                          model_specs(0, layers, true, true, rng), rng, alignment, rng() % 5000, true);
        auto file = GgufFile::open(wf.path);
        ASSERT_EQ(mappings_of(wf.path), 0);
        auto map = ModelMap::build(*file, MapSelection{});
        EXPECT_EQ(mappings_of(wf.path), 1);
        ASSERT_EQ(map->regions().size(), 1u);
        EXPECT_EQ(map->span_count(), wf.tensors.size());
        EXPECT_EQ(map->regions()[0].begin, wf.data_offset);
        expect_tensor_bytes(*map, wf);
        EXPECT_EQ(mappings_of(wf.path), 1);
        map.reset();
        EXPECT_EQ(mappings_of(wf.path), 0) << "the map unmaps its region";
    }
}

TEST(MappingModelMap, HalfTheLayersOfAFullFileIsOneRegion) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const int n_layers = 10;
    const WrittenFile wf = write_gguf(dir.file("full.gguf"), model_specs(0, n_layers, true, true, rng), rng);
    auto file = GgufFile::open(wf.path);
    const uint64_t file_size = std::filesystem::file_size(wf.path);

    // First stage: embedding + layers [0, 5). Second: layers [5, 10) + head.
    MapSelection first;
    first.layers.end = n_layers / 2;
    first.output = false;
    MapSelection second;
    second.layers.begin = n_layers / 2;
    second.embedding = false;
    for (const MapSelection& sel : {first, second}) {
        SCOPED_TRACE("layers from " + std::to_string(sel.layers.begin));
        size_t want_spans = 0;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (const PlacedTensor& t : wf.tensors) {
            const bool embd = t.name == "token_embd.weight";
            const bool head = t.name.starts_with("output");
            const int layer = embd || head ? -1 : std::stoi(t.name.substr(4));
            const bool in = embd ? sel.embedding
                                 : head ? sel.output : (layer >= sel.layers.begin && (sel.layers.end < 0 || layer < sel.layers.end));
            if (!in) continue;
            ++want_spans;
            lo = std::min(lo, t.file_offset);
            hi = std::max(hi, t.file_offset + t.nbytes);
        }
        auto map = ModelMap::build(*file, sel);
        ASSERT_EQ(map->regions().size(), 1u);
        EXPECT_EQ(map->span_count(), want_spans);
        EXPECT_EQ(map->regions()[0].begin, lo);
        EXPECT_EQ(map->regions()[0].end, hi);
        EXPECT_LT(map->mapped_bytes(), file_size * 3 / 4);
        EXPECT_EQ(map->summary(), expected_summary(1, want_spans, hi - lo, file_size));
        expect_tensor_bytes(*map, wf);  // the other half through exact views
    }
}

// Tensors of layers 0 and 1 alternate in the file; a stage that runs layer 0
// alone skips every other tensor. Each skipped tensor larger than max_gap
// must split, each smaller one must not.
TEST(MappingModelMap, InterleavedLayersGiveTheMinimalRegionCount) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const uint64_t g = region_max_gap();
    for (int mode = 0; mode < 3; ++mode) {  // 0: all skipped tensors big, 1: all small, 2: mixed
        SCOPED_TRACE("mode " + std::to_string(mode));
        const int n = 12 + static_cast<int>(rng() % 20);
        std::vector<TensorSpec> specs;
        for (int i = 0; i < n; ++i) {
            const int layer = i % 2;
            uint64_t size = rand_in(rng, 1, 2 * g);
            if (layer == 1) {
                const bool big = mode == 0 || (mode == 2 && rng() % 2);
                // Small: the gap including 32-byte alignment padding stays <= g.
                size = big ? rand_in(rng, g + 1, 3 * g) : rand_in(rng, 1, g - 64);
            }
            specs.push_back({"blk." + std::to_string(layer) + ".t" + std::to_string(i) + ".weight", size});
        }
        const WrittenFile wf = write_gguf(dir.file("inter" + std::to_string(mode) + ".gguf"), specs, rng);
        auto file = GgufFile::open(wf.path);

        // The minimum, from the layout: one region, plus one for every gap
        // between consecutive layer-0 tensors wider than max_gap.
        size_t want = 0, layer0 = 0;
        uint64_t prev_end = 0;
        for (const PlacedTensor& t : wf.tensors) {
            if (!t.name.starts_with("blk.0.")) continue;
            ++layer0;
            if (want == 0 || t.file_offset - prev_end > g) ++want;
            prev_end = t.file_offset + t.nbytes;
        }
        if (mode == 0) EXPECT_EQ(want, layer0);
        if (mode == 1) EXPECT_EQ(want, 1u);

        MapSelection sel;
        sel.layers.end = 1;
        const int before = mappings_of(wf.path);
        auto map = ModelMap::build(*file, sel);
        EXPECT_EQ(map->regions().size(), want);
        EXPECT_EQ(mappings_of(wf.path) - before, static_cast<int>(want));
        EXPECT_EQ(map->span_count(), layer0);
        expect_tensor_bytes(*map, wf);
    }
}

// Random files and selections against an independent answer computed by
// marking the selected bytes of the file.
TEST(MappingModelMap, RandomLayoutsAndSelections) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    TempDir dir;
    const uint64_t g = region_max_gap();
    for (int iter = 0; iter < 12; ++iter) {
        SCOPED_TRACE("iteration " + std::to_string(iter));
        struct Meta {
            int layer;  // -1 outside the blocks
            char kind;  // 'e' embedding, 'o' output, 'x' routed experts, 'n' non-routed, 'g' global
        };
        std::vector<TensorSpec> specs;
        std::vector<Meta> meta;
        auto size_of = [&] {
            switch (rng() % 4) {
                case 0: return rng() % 8 == 0 ? uint64_t{0} : rand_in(rng, 1, 64);
                case 1: return rand_in(rng, 1, g / 2);
                case 2: return rand_in(rng, g / 2, 2 * g);
                default: return rand_in(rng, 2 * g, 4 * g);
            }
        };
        auto gap_of = [&] {
            switch (rng() % 4) {
                case 0: return uint64_t{0};
                case 1: return rand_in(rng, 0, g);
                case 2: return rand_in(rng, g - 64, g + 64);
                default: return rand_in(rng, g, 3 * g);
            }
        };
        auto add = [&](std::string name, Meta m) {
            specs.push_back({std::move(name), size_of(), gap_of()});
            meta.push_back(m);
        };
        const int n_layers = 1 + static_cast<int>(rng() % 6);
        std::vector<std::pair<std::string, Meta>> all{{"token_embd.weight", {-1, 'e'}},
                                                      {"output_norm.weight", {-1, 'o'}},
                                                      {"output.weight", {-1, 'o'}},
                                                      {"rope_freqs.weight", {-1, 'g'}}};
        for (int l = 0; l < n_layers; ++l)
            for (const std::string& n : layer_tensor_names(l)) all.push_back({n, {l, is_expert_name(n) ? 'x' : 'n'}});
        // Either llama.cpp's order or any order at all.
        if (rng() % 2) std::shuffle(all.begin(), all.end(), rng);
        for (auto& [name, m] : all) add(name, m);
        const uint64_t alignment = uint64_t{32} << (rng() % 4 == 0 ? rng() % 13 : rng() % 4);
        const WrittenFile wf =
            write_gguf(dir.file("r" + std::to_string(iter) + ".gguf"), specs, rng, alignment, rng() % 3000, true);
        auto file = GgufFile::open(wf.path);

        MapSelection sel;
        sel.layers.begin = static_cast<int>(rng() % (n_layers + 1));
        sel.layers.end = rng() % 3 == 0 ? -1 : sel.layers.begin + static_cast<int>(rng() % (n_layers + 1 - sel.layers.begin));
        sel.embedding = rng() % 2;
        sel.output = rng() % 2;
        sel.non_routed = rng() % 2;
        sel.routed_experts = rng() % 2;
        SCOPED_TRACE("layers [" + std::to_string(sel.layers.begin) + ", " + std::to_string(sel.layers.end) + ") roles " +
                     std::to_string(sel.embedding) + std::to_string(sel.output) + std::to_string(sel.non_routed) +
                     std::to_string(sel.routed_experts));

        const bool runs_layers = sel.layers.end < 0 || sel.layers.end > sel.layers.begin;
        std::vector<uint8_t> marked(wf.file_size, 0);
        size_t want_spans = 0;
        std::vector<bool> wanted(specs.size());
        for (size_t i = 0; i < specs.size(); ++i) {
            const Meta m = meta[i];
            bool in = false;
            if (m.kind == 'e') in = sel.embedding;
            else if (m.kind == 'o') in = sel.output;
            else if (m.kind == 'g') in = sel.non_routed && runs_layers;
            else in = (m.kind == 'x' ? sel.routed_experts : sel.non_routed) && m.layer >= sel.layers.begin &&
                      (sel.layers.end < 0 || m.layer < sel.layers.end);
            if (!in || wf.tensors[i].nbytes == 0) continue;
            wanted[i] = true;
            ++want_spans;
            std::fill_n(marked.begin() + static_cast<ptrdiff_t>(wf.tensors[i].file_offset), wf.tensors[i].nbytes, 1);
        }
        const uint64_t max_gap = std::max(g, alignment);
        std::vector<std::pair<uint64_t, uint64_t>> want_regions;
        bool have = false;
        uint64_t last = 0;
        for (uint64_t p = 0; p < marked.size(); ++p) {
            if (!marked[p]) continue;
            if (!have || p - last - 1 > max_gap) want_regions.push_back({p, p});
            want_regions.back().second = p + 1;
            have = true;
            last = p;
        }

        const int before = mappings_of(wf.path);
        auto map = ModelMap::build(*file, sel);
        EXPECT_EQ(map->max_gap(), max_gap);
        EXPECT_EQ(map->span_count(), want_spans);
        const auto& regions = map->regions();
        ASSERT_EQ(regions.size(), want_regions.size());
        EXPECT_EQ(mappings_of(wf.path) - before, static_cast<int>(regions.size()));
        uint64_t sum = 0;
        for (size_t r = 0; r < regions.size(); ++r) {
            EXPECT_EQ(regions[r].begin, want_regions[r].first);
            EXPECT_EQ(regions[r].end, want_regions[r].second);
            if (r > 0) EXPECT_GT(regions[r].begin, regions[r - 1].end + max_gap) << "sorted, disjoint, apart";
            sum += regions[r].bytes();
        }
        EXPECT_EQ(map->mapped_bytes(), sum);
        // Each selected tensor is listed by exactly one region and lies in it.
        std::vector<int> listed(specs.size(), 0);
        for (const Region& r : regions)
            for (size_t t : r.tensors) {
                ASSERT_LT(t, file->tensors().size());
                const GgufTensorInfo& info = file->tensors()[t];
                EXPECT_GE(info.file_offset, r.begin);
                EXPECT_LE(info.file_offset + info.nbytes, r.end);
                EXPECT_EQ(map->region_of(info.file_offset, info.nbytes), &r);
                for (size_t i = 0; i < specs.size(); ++i)
                    if (specs[i].name == info.name) ++listed[i];
            }
        for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(listed[i], wanted[i] ? 1 : 0) << specs[i].name;
        EXPECT_EQ(map->summary(), expected_summary(regions.size(), want_spans, sum, wf.file_size));
        for (size_t r = 0; r < regions.size(); ++r) {
            const auto want = pread_bytes(wf.path, regions[r].begin, regions[r].bytes());
            EXPECT_EQ(0, std::memcmp(map->region_data(r), want.data(), want.size()));
        }
        expect_tensor_bytes(*map, wf);
    }
}

// The line from the design, on a sparse file the size of DeepSeek V4 Flash:
// 156 spans, 426.09 GiB of tensors in a 426.10 GiB file, one mmap.
TEST(MappingModelMap, SummaryOfAFullSizeModel) {
    std::mt19937_64 rng(fresh_seed());
    TempDir dir;
    const uint64_t tensor_bytes = static_cast<uint64_t>(426.0925 * 1073741824.0) / 156 / 32 * 32;
    std::vector<TensorSpec> specs;
    specs.push_back({"token_embd.weight", tensor_bytes});
    for (int l = 0; l < 9; ++l)
        for (const std::string& n : layer_tensor_names(l)) specs.push_back({n, tensor_bytes});
    specs.push_back({"output_norm.weight", tensor_bytes});
    specs.push_back({"output.weight", tensor_bytes});
    const WrittenFile wf = write_sparse_gguf(dir.file("big.gguf"), specs, rng, 11 << 20);
    auto file = GgufFile::open(wf.path);
    auto map = ModelMap::build(*file, MapSelection{});
    EXPECT_EQ(map->summary(), "model map: 1 region across 156 tensor spans (426.09 GiB of 426.10 GiB file)");
    EXPECT_EQ(mappings_of(wf.path), 1);
    // Far into the region the sparse file reads as zeros.
    EXPECT_EQ(map->tensor_data("output.weight")[tensor_bytes - 1], 0);

    MapSelection two;
    two.layers.begin = 4;
    two.layers.end = 4;  // no layers: embedding and head, far apart
    auto heads = ModelMap::build(*file, two);
    EXPECT_EQ(heads->summary(), "model map: 2 regions across 3 tensor spans (8.19 GiB of 426.10 GiB file)");
}

TEST(MappingModelMap, SingleRegionSummaryOfATinyFile) {
    std::mt19937_64 rng(fresh_seed());
    TempDir dir;
    const WrittenFile wf = write_gguf(dir.file("one.gguf"), {{"token_embd.weight", 1000}}, rng);
    auto file = GgufFile::open(wf.path);
    auto map = ModelMap::build(*file, MapSelection{});
    EXPECT_EQ(map->summary(), "model map: 1 region across 1 tensor spans (0.00 GiB of 0.00 GiB file)");
    MapSelection none;
    none.embedding = false;
    auto empty = ModelMap::build(*file, none);
    EXPECT_EQ(empty->summary(), "model map: 0 regions across 0 tensor spans (0.00 GiB of 0.00 GiB file)");
    EXPECT_EQ(empty->mapped_bytes(), 0u);
}

TEST(MappingModelMap, PopulateAndLockKeepTheBytes) {
    std::mt19937_64 rng(fresh_seed());
    TempDir dir;
    const WrittenFile wf = write_gguf(dir.file("m.gguf"), model_specs(0, 2, true, true, rng), rng);
    auto file = GgufFile::open(wf.path);
    ModelMapOptions opts;
    opts.populate = true;
    opts.lock = true;
    auto map = ModelMap::build(*file, MapSelection{}, opts);
    ASSERT_EQ(map->regions().size(), 1u);
    // mlock may be refused (RLIMIT_MEMLOCK); that is a warning, never an error.
    for (const std::string& w : map->warnings()) {
        EXPECT_TRUE(w.starts_with("could not lock region 1 of 1")) << w;
        EXPECT_EQ(w.back(), '.') << w;
    }
    expect_tensor_bytes(*map, wf);
}

TEST(MappingModelMap, BadUseIsOneSentence) {
    std::mt19937_64 rng(fresh_seed());
    TempDir dir;
    const WrittenFile wf = write_gguf(dir.file("m.gguf"), model_specs(0, 2, true, true, rng), rng);
    auto file = GgufFile::open(wf.path);

    MapSelection backwards;
    backwards.layers.begin = 3;
    backwards.layers.end = 2;
    EXPECT_THROW(ModelMap::build(*file, backwards), Error);
    MapSelection negative;
    negative.layers.begin = -2;
    EXPECT_THROW(ModelMap::build(*file, negative), Error);

    const auto bytes = pread_bytes(wf.path, 0, wf.file_size);
    auto in_memory = GgufFile::parse(bytes.data(), bytes.size(), "memory.gguf");
    try {
        ModelMap::build(*in_memory, MapSelection{});
        ADD_FAILURE() << "a file parsed from memory cannot be mapped";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("memory.gguf"), std::string::npos) << e.what();
    }

    auto map = ModelMap::build(*file, MapSelection{});
    EXPECT_THROW(map->region_data(1), Error);
    EXPECT_THROW(map->tensor_data("blk.7.nothing.weight"), Error);
}

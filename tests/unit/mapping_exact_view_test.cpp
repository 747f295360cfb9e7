// Views of any in-file byte range: served from a region when inside one,
// otherwise from an exact view that is cached, shared and unmapped when let go.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "mapping_test_file.h"
#include "support/test_seed.h"

using namespace ds4;
using namespace mapping_test;

namespace {

uint64_t fresh_seed() { return ds4::test::test_seed(); }

// Layers 0..3 of a MoE model; experts big enough that unselected layers
// leave gaps wider than max_gap.
struct Fixture {
    explicit Fixture(std::mt19937_64& rng) {
        const uint64_t g = region_max_gap();
        std::vector<TensorSpec> specs{{"token_embd.weight", g + rng() % g}};
        for (int l = 0; l < 4; ++l)
            for (const std::string& n : layer_tensor_names(l))
                specs.push_back({n, is_expert_name(n) ? 2 * g + rng() % g : 1 + rng() % 5000});
        specs.push_back({"output_norm.weight", 1 + rng() % 5000});
        specs.push_back({"output.weight", g + rng() % g});
        wf = write_gguf(dir.file("model.gguf"), specs, rng, 32, rng() % 10000);
        file = GgufFile::open(wf.path);
        bytes = pread_bytes(wf.path, 0, wf.file_size);
    }
    // Layer 1 and the head only: the embedding, layers 0, 2, 3 are not mapped.
    static MapSelection layer1() {
        MapSelection sel;
        sel.layers.begin = 1;
        sel.layers.end = 2;
        sel.embedding = false;
        return sel;
    }
    const PlacedTensor& tensor(const std::string& name) const {
        for (const PlacedTensor& t : wf.tensors)
            if (t.name == name) return t;
        throw std::runtime_error("no tensor " + name);
    }
    bool same_bytes(const FileView& v) const {
        return v.size() == 0 || std::memcmp(v.data(), bytes.data() + v.offset(), v.size()) == 0;
    }

    TempDir dir;
    WrittenFile wf;
    std::unique_ptr<GgufFile> file;
    std::vector<uint8_t> bytes;  // the whole file, read with pread
};

}  // namespace

TEST(MappingExactView, RandomRangesReadTheFileBytes) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture fx(rng);
    ModelMapOptions opts;
    opts.idle_views = rng() % 6;
    auto map = ModelMap::build(*fx.file, Fixture::layer1(), opts);
    ASSERT_EQ(map->regions().size(), 2u) << "layer 1, then the head";
    const uint64_t size = fx.wf.file_size;

    std::vector<std::shared_ptr<const FileView>> held;
    size_t in_region = 0, exact = 0;
    for (int i = 0; i < 600; ++i) {
        uint64_t off, len;
        if (rng() % 3 == 0) {  // inside a region, to hit the no-new-mapping path
            const Region& r = map->regions()[rng() % map->regions().size()];
            off = r.begin + rng() % r.bytes();
            len = rng() % (r.end - off + 1);
        } else {
            off = rng() % (size + 1);
            const uint64_t scale = uint64_t{1} << (rng() % 20);
            len = rng() % std::min(size - off + 1, scale + 1);
        }
        SCOPED_TRACE("range " + std::to_string(off) + " + " + std::to_string(len));
        const size_t count_before = map->exact_view_count();
        auto v = map->view(off, len);
        ASSERT_TRUE(v);
        EXPECT_EQ(v->offset(), off);
        EXPECT_EQ(v->size(), len);
        ASSERT_TRUE(fx.same_bytes(*v));
        if (const Region* r = map->region_of(off, len)) {
            ++in_region;
            EXPECT_EQ(v->data(), map->region_data(static_cast<size_t>(r - map->regions().data())) + (off - r->begin));
            EXPECT_EQ(map->exact_view_count(), count_before) << "a range inside a region maps nothing";
        } else if (len > 0) {
            ++exact;
        } else {
            EXPECT_EQ(v->data(), nullptr);
        }
        if (rng() % 4 == 0) held.push_back(v);
        if (held.size() > 8) held.erase(held.begin() + static_cast<ptrdiff_t>(rng() % held.size()));
    }
    EXPECT_GT(in_region, 50u);
    EXPECT_GT(exact, 50u);
    for (const auto& v : held) EXPECT_TRUE(fx.same_bytes(*v));
    held.clear();
    EXPECT_LE(map->exact_view_count(), opts.idle_views);
}

TEST(MappingExactView, SharedWhileHeldFreedWhenLetGo) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture fx(rng);
    ModelMapOptions opts;
    opts.idle_views = 0;
    auto map = ModelMap::build(*fx.file, Fixture::layer1(), opts);
    const int regions = mappings_of(fx.wf.path);
    ASSERT_EQ(regions, 2);

    const PlacedTensor& t = fx.tensor("blk.0.ffn_up_exps.weight");  // not selected
    ASSERT_EQ(map->region_of(t.file_offset, t.nbytes), nullptr);
    auto a = map->view(t.file_offset, t.nbytes);
    EXPECT_EQ(map->exact_view_count(), 1u);
    EXPECT_EQ(mappings_of(fx.wf.path), regions + 1);
    auto b = map->view(t.file_offset, t.nbytes);
    EXPECT_EQ(b->data(), a->data()) << "the same range while held is the same mapping";
    auto c = map->view(t.file_offset + 7, 100);  // a part of a held view shares its mapping
    EXPECT_EQ(c->data(), a->data() + 7);
    EXPECT_EQ(map->exact_view_count(), 1u);
    EXPECT_EQ(mappings_of(fx.wf.path), regions + 1);

    const PlacedTensor& u = fx.tensor("blk.3.ffn_down_exps.weight");
    auto d = map->view(u.file_offset, u.nbytes);
    EXPECT_EQ(map->exact_view_count(), 2u);
    EXPECT_EQ(mappings_of(fx.wf.path), regions + 2);
    EXPECT_TRUE(fx.same_bytes(*a) && fx.same_bytes(*c) && fx.same_bytes(*d));

    a.reset();
    b.reset();
    EXPECT_EQ(map->exact_view_count(), 2u) << "c still holds the pages";
    c.reset();
    EXPECT_EQ(map->exact_view_count(), 1u);
    EXPECT_EQ(mappings_of(fx.wf.path), regions + 1);
    d.reset();
    EXPECT_EQ(map->exact_view_count(), 0u);
    EXPECT_EQ(mappings_of(fx.wf.path), regions);
}

TEST(MappingExactView, IdleViewsAreKeptBoundedAndReused) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture fx(rng);
    ModelMapOptions opts;
    opts.idle_views = 2;
    auto map = ModelMap::build(*fx.file, Fixture::layer1(), opts);
    const int regions = mappings_of(fx.wf.path);

    std::vector<const uint8_t*> ptrs;
    std::vector<const PlacedTensor*> ts;
    for (const char* name : {"token_embd.weight", "blk.0.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight",
                             "blk.3.ffn_gate_exps.weight", "blk.3.ffn_down_exps.weight"}) {
        ts.push_back(&fx.tensor(name));
        auto v = map->view(ts.back()->file_offset, ts.back()->nbytes);  // let go at once
        ptrs.push_back(v->data());
        EXPECT_TRUE(fx.same_bytes(*v));
    }
    EXPECT_EQ(map->exact_view_count(), 2u) << "only the two most recent stay";
    EXPECT_EQ(mappings_of(fx.wf.path), regions + 2);
    auto again = map->view(ts[4]->file_offset, ts[4]->nbytes);
    EXPECT_EQ(again->data(), ptrs[4]) << "an idle view is reused, not mapped again";
    EXPECT_EQ(map->exact_view_count(), 2u);
    auto first = map->view(ts[0]->file_offset, ts[0]->nbytes);
    EXPECT_TRUE(fx.same_bytes(*first));
    EXPECT_EQ(map->exact_view_count(), 3u);
    again.reset();
    first.reset();
    EXPECT_EQ(map->exact_view_count(), 2u);
    map.reset();
    EXPECT_EQ(mappings_of(fx.wf.path), 0) << "the map's end unmaps idle views and regions";
}

TEST(MappingExactView, OutOfFileRangesThrowOneSentence) {
    std::mt19937_64 rng(fresh_seed());
    Fixture fx(rng);
    auto map = ModelMap::build(*fx.file, Fixture::layer1());
    const uint64_t n = fx.wf.file_size;
    const std::pair<uint64_t, uint64_t> bad[] = {
        {n + 1, 0}, {n, 1}, {0, n + 1}, {n - 10, 11}, {1, UINT64_MAX}, {UINT64_MAX, 1}, {UINT64_MAX, UINT64_MAX}};
    for (const auto& [off, len] : bad) {
        try {
            map->view(off, len);
            ADD_FAILURE() << "no error for " << off << " + " << len;
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(fx.wf.path), std::string::npos) << msg;
            EXPECT_EQ(msg.back(), '.') << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
    }
    // The edges themselves are in the file.
    auto whole = map->view(0, n);
    EXPECT_TRUE(fx.same_bytes(*whole));
    EXPECT_EQ(map->view(n, 0)->size(), 0u);
    auto last = map->view(n - 1, 1);
    EXPECT_EQ(*last->data(), fx.bytes.back());
}

TEST(MappingExactView, UnselectedTensorDataIsPinnedByTheMap) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture fx(rng);
    ModelMapOptions opts;
    opts.idle_views = 0;
    auto map = ModelMap::build(*fx.file, Fixture::layer1(), opts);
    const PlacedTensor& t = fx.tensor("blk.2.ffn_down_exps.weight");
    const uint8_t* p = map->tensor_data(t.name);
    ASSERT_EQ(0, std::memcmp(p, fx.bytes.data() + t.file_offset, t.nbytes));
    EXPECT_EQ(map->exact_view_count(), 1u);
    EXPECT_EQ(map->tensor_data(fx.file->require_tensor(t.name)), p);
    EXPECT_EQ(map->view(t.file_offset, t.nbytes)->data(), p) << "a view of a pinned tensor shares its mapping";
    EXPECT_EQ(map->exact_view_count(), 1u) << "still pinned after the extra view is let go";
    // One expert's rows out of a pinned expert tensor: no new mapping.
    const uint64_t part = t.nbytes / 3 + rng() % (t.nbytes / 3);
    EXPECT_EQ(map->view(t.file_offset + part, t.nbytes / 3)->data(), p + part);
    EXPECT_EQ(map->exact_view_count(), 1u);

    // Selected tensors and small unselected neighbours inside a region need nothing new.
    const PlacedTensor& s = fx.tensor("blk.1.attn_q_a.weight");
    EXPECT_EQ(0, std::memcmp(map->tensor_data(s.name), fx.bytes.data() + s.file_offset, s.nbytes));
    EXPECT_EQ(map->exact_view_count(), 1u);
    map.reset();
    EXPECT_EQ(mappings_of(fx.wf.path), 0);
}

TEST(MappingExactView, ViewsOutliveTheMap) {
    std::mt19937_64 rng(fresh_seed());
    Fixture fx(rng);
    auto map = ModelMap::build(*fx.file, Fixture::layer1());
    const Region r = map->regions()[0];
    auto in_region = map->view(r.begin + 1, r.bytes() - 1);
    const PlacedTensor& t = fx.tensor("token_embd.weight");
    auto exact = map->view(t.file_offset, t.nbytes);
    map.reset();
    EXPECT_TRUE(fx.same_bytes(*in_region));
    EXPECT_TRUE(fx.same_bytes(*exact));
    EXPECT_EQ(mappings_of(fx.wf.path), 2);
    in_region.reset();
    exact.reset();
    EXPECT_EQ(mappings_of(fx.wf.path), 0);
}

TEST(MappingExactView, ConcurrentViewsOfOverlappingRanges) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(ds4::test::seed_note(seed));
    std::mt19937_64 rng(seed);
    Fixture fx(rng);
    ModelMapOptions opts;
    opts.idle_views = 1;  // constant churn: views let go, reused, evicted
    auto map = ModelMap::build(*fx.file, Fixture::layer1(), opts);
    // A small pool of ranges so that threads share, drop and re-create the
    // same page ranges at the same time.
    std::vector<std::pair<uint64_t, uint64_t>> pool;
    for (int i = 0; i < 12; ++i) {
        const uint64_t off = rng() % fx.wf.file_size;
        pool.push_back({off, 1 + rng() % std::min<uint64_t>(fx.wf.file_size - off, 300000)});
    }
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int th = 0; th < 4; ++th)
        threads.emplace_back([&, s = rng()] {
            std::mt19937_64 r(s);
            std::shared_ptr<const FileView> keep;
            for (int i = 0; i < 2000; ++i) {
                const auto& [off, len] = pool[r() % pool.size()];
                auto v = map->view(off, len);
                if (!fx.same_bytes(*v) || v->offset() != off || v->size() != len) ++bad;
                if (r() % 8 == 0) keep = v;
                if (r() % 16 == 0) map->tensor_data("blk.0.ffn_up_exps.weight");
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(map->exact_view_count(), 1u + 1u) << "the pinned tensor and one idle view";
    EXPECT_EQ(mappings_of(fx.wf.path), 2 + 2);
}

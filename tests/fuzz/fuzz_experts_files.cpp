// Fuzz target for the files of SSD streaming (the experts layer): any bytes go
// through the three readers a run or a tool points at a file,
//   - parse_routing_trace (--ssd-streaming-trace-out, ds4-trace),
//   - read_routing_profile (--ssd-streaming-profile),
//   - ExpertPack::open (--ssd-streaming-pack, ds4-gguf pack),
// and only ds4::Error may come out of them, never a crash, a sanitizer report
// or another exception. What parses must keep the reader's promises: a trace's
// routes name its blocks and hold ids below their expert counts, and it reads
// back the same after formatting (then replays through the cache policy when
// small enough to be cheap); a profile is what its lines said, in range; an
// opened pack's blocks, records and sizes add up to the file. The seed corpus
// (tests/fuzz/corpus/fuzz_experts_files) holds one valid file of each kind.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/error.h"
#include "fuzz_support.h"
#include "experts/expert_pack.h"
#include "experts/routing_profile.h"
#include "experts/routing_trace.h"
#include "experts/trace_replay.h"

namespace {

using namespace ds4;

void check_trace(const RoutingTrace& t) {
    const int64_t k = t.experts_per_token;
    FUZZ_REQUIRE(k >= 1 && k <= kTraceMaxExpertsPerToken);
    FUZZ_REQUIRE(static_cast<int64_t>(t.blocks.size()) <= kTraceMaxBlocks);
    for (size_t b = 0; b < t.blocks.size(); ++b) {
        FUZZ_REQUIRE(t.blocks[b].layer >= 0 && t.blocks[b].layer <= kTraceMaxLayer);
        FUZZ_REQUIRE(t.blocks[b].n_expert >= 1 && t.blocks[b].n_expert <= kTraceMaxExperts);
        FUZZ_REQUIRE(b == 0 || t.blocks[b - 1].layer < t.blocks[b].layer);
    }
    for (size_t r = 0; r < t.routes.size(); ++r) {
        const TraceRoute& route = t.routes[r];
        const PolicyBlock* block = nullptr;
        for (const PolicyBlock& b : t.blocks)
            if (b.layer == route.layer) block = &b;
        FUZZ_REQUIRE(block != nullptr);
        FUZZ_REQUIRE(route.rows >= 1 && route.rows <= kTraceMaxRows);
        FUZZ_REQUIRE(route.first + static_cast<uint64_t>(route.rows * k) <= t.ids.size());
        for (int32_t id : t.route_ids(r)) FUZZ_REQUIRE(id >= 0 && id < block->n_expert);
    }
    // What parses reads back the same after formatting.
    const RoutingTrace again = parse_routing_trace(format_routing_trace(t), "the formatted trace");
    FUZZ_REQUIRE(again.source == t.source && again.experts_per_token == k && again.ids == t.ids);
    FUZZ_REQUIRE(again.blocks.size() == t.blocks.size() && again.routes.size() == t.routes.size());
    for (size_t b = 0; b < t.blocks.size(); ++b)
        FUZZ_REQUIRE(again.blocks[b].layer == t.blocks[b].layer && again.blocks[b].n_expert == t.blocks[b].n_expert);
    for (size_t r = 0; r < t.routes.size(); ++r)
        FUZZ_REQUIRE(again.routes[r].layer == t.routes[r].layer && again.routes[r].rows == t.routes[r].rows &&
                     again.routes[r].first == t.routes[r].first);
    // The cache policy over it, at a budget below every block's experts (its
    // state is per expert, so huge expert counts are left out: a fuzzed
    // count of 2^30 would only measure the allocator).
    if (t.total_experts() <= (int64_t{1} << 16)) {
        ReplayOptions opts;
        opts.device_slots = 1 + t.total_experts() / 3;
        opts.host_slots = t.total_experts() / 2;
        const ReplayResult res = replay_trace(t, opts);
        FUZZ_REQUIRE(res.routes == t.routes.size());
        FUZZ_REQUIRE(res.counts.hits + res.counts.misses <= res.counts.lookups);
    }
}

void check_profile(const ExpertCounts& counts) {
    for (const auto& [key, count] : counts) {
        FUZZ_REQUIRE(key.first >= 0 && key.first <= (1 << 20));
        FUZZ_REQUIRE(key.second >= 0 && key.second <= (int64_t{1} << 30));
        (void)count;
    }
    const auto order = hottest_first(counts);
    FUZZ_REQUIRE(order.size() == counts.size());
}

void check_pack(const ExpertPack& pack, size_t size) {
    const PackLayout& l = pack.layout();
    FUZZ_REQUIRE(l.file_bytes == size);
    FUZZ_REQUIRE(l.header_bytes % kPackAlign == 0 && l.header_bytes <= l.records_end && l.records_end <= l.file_bytes);
    uint64_t records = 0;
    for (const PackBlock& b : l.blocks) {
        FUZZ_REQUIRE(b.n_expert >= 1 && b.record_bytes % kPackAlign == 0 && b.record_bytes > 0);
        FUZZ_REQUIRE(b.first_record >= l.header_bytes);
        FUZZ_REQUIRE(b.record_offset(b.n_expert - 1) + b.record_bytes <= l.records_end);
        FUZZ_REQUIRE(b.part(PackPart::gate) && b.part(PackPart::up) && b.part(PackPart::down));
        for (const PackPartLayout& p : b.parts) FUZZ_REQUIRE(p.offset + p.bytes <= b.record_bytes);
        FUZZ_REQUIRE(pack.block(b.layer) == &b);
        records += static_cast<uint64_t>(b.n_expert);
    }
    FUZZ_REQUIRE(records == l.n_records());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        check_trace(parse_routing_trace(text, "the fuzzed trace"));
    } catch (const Error&) {
    }
    const std::string path = fuzz::as_file(data, size);
    std::string warning;
    // An unreadable or damaged profile is empty with a warning, never an exception.
    check_profile(read_routing_profile(path, "fuzz-model", warning));
    try {
        check_pack(ExpertPack::open(path), size);
    } catch (const Error&) {
    }
    return 0;
}

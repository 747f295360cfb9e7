// An expert cache: a bounded set of slots, each holding one (layer, expert)'s
// gate, up and down matrices, filled from the GGUF file when the router asks
// for an expert no slot holds. The model map then need not hold any routed
// expert (the bytes are read from the file, ExpertReader), which is what
// lets a model larger than memory run.
//
// Works at any budget, one slot included, and gives the same logits as the
// resident experts whatever it holds:
// - a step whose experts fit the slots (plus a few scratch slots, one
//   token's worth, that are refilled each step and never remembered) is
//   served per expert: hits from their slots, misses read in one batch;
// - a step that needs more (a long prefill chunk, many sequences at once),
//   or whose misses are most of the block anyway, reads the block's whole
//   routed tensors into a layer buffer (three long sequential reads) and
//   runs against it, leaving the slots as they were ("full-layer").
// Eviction keeps the experts the router picks most often: a routing
// frequency that decays with a half-life of a few dozen steps, the least
// recently used first among equals; an expert colder than every cached one
// goes to a scratch slot instead of evicting a warmer one. Experts of the
// current step are never evicted. Those decisions are CachePolicy's
// (experts/cache_policy.h), which a routing-trace replay runs alone.
//
// With an expert pack (ExpertCacheOptions::pack, experts/expert_pack.h) a
// miss is one read of the expert's record, its three matrices side by side,
// straight into the slot (whose parts then sit where the record has them),
// checked against the record's checksum; without one, three reads from the
// GGUF's tensors. Full-layer reads and the host tier's start-up fill keep
// reading the GGUF's whole tensors: three long sequential reads per block
// are already the disk's best pattern, and the records interleave the
// matrix kinds, which a full-layer step would have to copy apart.
//
// Where the slots are device memory (CUDA), a host tier in page-locked RAM
// (HostTier) sits between the file and them: a device miss it holds is a
// PCIe copy, not a disk read; a tier that holds every expert is filled at
// start and the disk drops out of the run.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ssd_streaming.h"
#include "experts/expert_pack.h"
#include "experts/expert_reader.h"
#include "experts/cache_policy.h"
#include "experts/expert_source.h"
#include "experts/host_tier.h"
#include "experts/read_worker.h"
#include "experts/routing_profile.h"
#include "experts/routing_trace_writer.h"

namespace ds4 {

class ModelMap;

struct ExpertCacheOptions {
    int64_t slots = 0;              // remembered slots; 0: one per expert of every block
    int64_t experts_per_token = 0;  // the family's expert_used_count: that many scratch slots
    PrefillStrategy prefill = PrefillStrategy::automatic;
    ReaderOptions reader;
    // Page-locked host slots between the file and the device slots, for
    // backends that compute from their own memory (CUDA); 0: none.
    int64_t host_slots = 0;
    // Steps (all blocks once) over which a routing count halves.
    double half_life_steps = 32;
    // An expert pack of the model file (--ssd-streaming-pack): misses are
    // read from it, one request per expert; "": from the GGUF.
    std::string pack;
    // --ssd-streaming-trace-out: every step's routing, as the cache saw it,
    // written to this file (experts/routing_trace.h); "": none.
    std::string trace_out;
    // --ssd-streaming-overlap: a step's misses are read on a thread of
    // their own while the MoE op computes the hits, where the backend's MoE
    // ops take experts as they arrive (the CPU); else the step waits.
    bool overlap = true;
    // --ssd-streaming-lookahead: with the overlap, the next block's likely
    // experts (the families' router lookahead) are read ahead into a
    // buffer of two tokens' experts while its attention computes.
    bool lookahead = false;
};

class ExpertCache final : public ExpertSource {
public:
    // Slots for `options.slots` experts of `blocks`, attached to `backend`
    // and read from `map`'s file. Throws ds4::Error for a negative count, a
    // slot table larger than the address space, or an options.pack that is
    // not a whole pack of this model file (one sentence each).
    ExpertCache(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks,
                const ExpertCacheOptions& options);
    ExpertCache(Backend& backend, ModelMap& map, const std::vector<RoutedExperts>& blocks, int64_t slots)
        : ExpertCache(backend, map, blocks, options_for(slots)) {}
    ~ExpertCache() override;
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    static ExpertCacheOptions options_for(int64_t slots) {
        ExpertCacheOptions o;
        o.slots = slots;
        return o;
    }
    // Bytes of one slot for these blocks (the largest block's gate, up and
    // down, each part aligned), to size a cache by bytes.
    static uint64_t slot_bytes_for(const std::vector<RoutedExperts>& blocks);

    std::string describe() const override;
    std::string stats_line() const override;
    ExpertSourceStats stats() const override;
    bool needs_mapped_experts() const override { return false; }
    bool replayable() const override { return false; }  // reads the routing back to fill slots
    ExpertMatrices resolve(Backend& backend, const RoutedExperts& block, Routing& routing) override;
    bool wants_lookahead(int64_t rows) const override { return n_ahead_ > 0 && rows * options_.experts_per_token <= n_ahead_ * 4; }
    void prefetch(Backend& backend, const RoutedExperts& next, const Routing& guess) override;

    // Loads these (layer, expert) pairs, hottest first, into free or cold
    // slots until the remembered slots are full: a warm start from a
    // routing profile. Pairs the cache has no block for are skipped.
    void preload(Backend& backend, const std::vector<std::pair<int, int64_t>>& experts);
    // Routing counts so far, by (layer, expert), undecayed: what a profile
    // records for the next run's preload.
    ExpertCounts routing_counts() const;
    // Ends the routing trace, if one is written (its trailer, then close).
    // Throws ds4::Error when the file could not be written.
    void finish_trace();

    int64_t slots() const { return n_slots_; }
    int64_t host_slots() const { return policy_->host_slots(); }
    int64_t scratch_slots() const { return n_scratch_; }
    uint64_t slot_bytes() const { return slot_bytes_; }

private:
    // Where block b's matrices sit inside a slot, and its scales.
    struct BlockLayout {
        const RoutedExperts* block = nullptr;
        uint64_t up_offset = 0, down_offset = 0;
        size_t scales = 0;     // index of the block's first scale array in scales_
        std::vector<float> scale_values[3];  // the file's gate/up/down scales (empty if none)
        const PackBlock* pack = nullptr;     // its records in the expert pack, if one is read
    };

    // A step's misses, ready to be read: where each one's bytes go and the
    // read requests.
    struct MissReads {
        const BlockLayout* layout = nullptr;
        std::vector<std::pair<int64_t, int64_t>> loads;  // (slot, expert); read ahead: (buffer slot, expert)
        HostPlan host;
        std::vector<const uint8_t*> source;  // copied into the slot after the reads (null: read in place)
        std::vector<uint8_t*> read_into;     // null: a host-tier hit, nothing to read
        std::vector<ExpertReader::Request> reads;
        bool lookahead = false;  // read ahead on a guess: a failure fails no step
    };
    class Arrival;
    // The read requests of one expert of block L into `into` (the slot's layout).
    void append_reads(const BlockLayout& L, int64_t expert, uint8_t* into, std::vector<ExpertReader::Request>& reads) const;

    // Reads the misses of one step into their slots, all in flight at once.
    void load(Backend& backend, const BlockLayout& L, const std::vector<std::pair<int64_t, int64_t>>& slot_expert);
    // Under the lock: the host tier's part, the requests, the slots' scales.
    MissReads prepare_load(Backend& backend, const BlockLayout& L,
                           const std::vector<std::pair<int64_t, int64_t>>& slot_expert);
    // The reads, the pack's checksums and the copies into the slots; on any
    // thread (the read worker's). Throws ds4::Error; the caller forgets the loads.
    void read_misses(Backend& backend, const MissReads& m);
    // Waits for the reads in flight, if any; on a failure forgets their
    // loads and, if `rethrow`, throws the read's error.
    void settle(bool rethrow);
    // f(), its wall time added to the time steps waited on reads.
    template <class F>
    auto timed(F&& f) -> decltype(f());
    ExpertMatrices slot_matrices(const BlockLayout& L) const;
    // Reads block b's gate, up and down tensors whole (three long reads)
    // to base + at[0..2].
    void read_block(const RoutedExperts& b, const uint64_t* at, uint8_t* base);
    // Reads every expert into the host tier (one that holds them all).
    void warm_host_tier();
    std::string host_text() const;
    ExpertMatrices full_layer(Backend& backend, const BlockLayout& L);
    bool reads_in_place_ = false;   // the backend computes on the host slots themselves

    std::vector<RoutedExperts> blocks_;
    ExpertReader reader_;
    std::unique_ptr<ExpertPack> pack_;           // null: misses read from the GGUF
    std::unique_ptr<ExpertReader> pack_reader_;
    ExpertCacheOptions options_;
    std::unique_ptr<CachePolicy> policy_;  // what each slot holds; what a miss evicts
    std::unique_ptr<HostTier> host_;  // null: none (the CPU, or no budget)
    StagingBuffer staging_;           // misses on their way to backend memory
    int64_t n_slots_ = 0, n_scratch_ = 0;
    uint64_t slot_bytes_ = 0;
    std::unordered_map<int, BlockLayout> layout_;   // by layer
    std::unique_ptr<RoutingTraceWriter> trace_;     // --ssd-streaming-trace-out, if asked
    uint8_t* bytes_ = nullptr;                       // (n_slots_ + n_scratch_ + 1) * slot_bytes_
    uint64_t bytes_size_ = 0;
    float* scales_ = nullptr;                        // per block, per matrix kind: one float per slot
    uint64_t scales_size_ = 0;
    uint8_t* layer_ = nullptr;                       // one block's routed tensors, mapped on first use
    uint64_t layer_size_ = 0;
    int layer_holds_ = -1;                           // the block in layer_, if any
    // Counters, read by other threads (/metrics) while steps run: every
    // resolve holds the lock, so a reader sees whole steps.
    mutable std::mutex stats_mu_;
    ExpertSourceStats stats_;  // the reads; the policy counts the rest
    // The router lookahead's buffer: n_ahead_ slots read ahead for block
    // ahead_layer_ (-1: none), ahead_expert_[k] in slot k (-1: empty).
    uint8_t* ahead_ = nullptr;
    uint64_t ahead_size_ = 0;
    int64_t n_ahead_ = 0;
    int ahead_layer_ = -1;
    std::vector<int64_t> ahead_expert_;
    // Declared last: destroyed first, so no read runs once the members
    // above are gone.
    std::unique_ptr<MissReads> in_flight_;  // the misses the read worker is reading
    std::unique_ptr<ReadWorker> worker_;    // null: a step reads its misses itself
};

}  // namespace ds4

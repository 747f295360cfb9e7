// Snapshots of sequences kept in host memory under the tokens they hold, so
// a new prompt resumes from the longest one it starts with. Needed where the
// live cache cannot rewind: DeepSeek V4's window and compressor rings only
// resume exactly where they end, and its chat template drops the reasoning
// of earlier turns, so the next turn's prompt leaves the live sequence
// inside the last reply. A snapshot taken at the end of each prompt turns
// that full re-prefill into the reply and the new turn only.
//
// Bounded by bytes; the least recently used snapshots go first. With a disk
// tier (snapshot_disk.h) every stored snapshot is also written there, and a
// prompt that finds no longer prefix in RAM is looked up on disk.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>

#include "engine/session.h"
#include "engine/snapshot_disk.h"

namespace ds4 {

struct PrefixCacheStats {
    uint64_t stores = 0, hits = 0, misses = 0, evictions = 0;
    uint64_t disk_hits = 0;  // prefixes read back from the disk tier (not in hits)
    uint64_t tokens_reused = 0;  // prompt tokens restored instead of evaluated
};

class PrefixCache {
public:
    explicit PrefixCache(uint64_t max_bytes, std::unique_ptr<SnapshotDisk> disk = nullptr)
        : max_bytes_(max_bytes), disk_(std::move(disk)) {}

    // Keeps a copy of the session's state under its tokens (replacing an
    // entry with the same tokens). Not kept when it alone exceeds the budget
    // or the session holds nothing; older entries are evicted to make room.
    void store(const Session& session);
    // The same for a snapshot taken elsewhere (a slot of a pool).
    void store(SessionSnapshot snapshot);
    // The entry whose tokens are the longest prefix of `prompt` with more
    // than `at_least` and fewer than prompt.size() tokens (the last prompt
    // token must be evaluated for its logits), or null; a hit becomes the
    // most recently used. The disk tier is asked for a longer prefix than
    // RAM holds; what it returns stays valid until the next find.
    const SessionSnapshot* find(std::span<const int32_t> prompt, int64_t at_least);

    uint64_t bytes() const { return bytes_; }
    size_t size() const { return entries_.size(); }
    const PrefixCacheStats& stats() const { return stats_; }
    // The disk tier, or null.
    SnapshotDisk* disk() const { return disk_.get(); }

private:
    friend class Session;  // counts what reuse_prefix restored
    uint64_t max_bytes_;
    uint64_t bytes_ = 0;
    std::list<SessionSnapshot> entries_;  // most recently used first
    PrefixCacheStats stats_;
    std::unique_ptr<SnapshotDisk> disk_;
    std::optional<SessionSnapshot> from_disk_;  // the last disk hit, when RAM could not keep it
};

}  // namespace ds4

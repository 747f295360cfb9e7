// The disk tier of the prefix cache (ds4-server --kv-disk-dir): sequence
// snapshots in files named by a hash of their tokens, so a request whose
// prompt starts with a stored prefix skips that prefill even after a
// restart. Writes happen on a thread of their own (a snapshot of a long
// context is large) and are atomic (snapshot_file.h); the directory is
// bounded by bytes, the least recently used files going first.
//
// At startup every file is indexed by its header. A file that is corrupt,
// truncated or another model's is ignored with one warning and never
// loaded; temporary files of a writer that died are removed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "engine/session.h"
#include "engine/snapshot_file.h"

namespace ds4 {

struct SnapshotDiskOptions {
    std::string dir;
    uint64_t max_bytes = 0;
    std::string model_identity;  // mapping/model_identity of the serving file
    SnapshotCodec codec = SnapshotCodec::zstd;
};

struct SnapshotDiskStats {
    uint64_t stores = 0, store_failures = 0;
    uint64_t hits = 0, misses = 0, load_failures = 0;
    uint64_t evictions = 0;
    uint64_t bytes_read = 0, bytes_written = 0;  // file bytes
    uint64_t files = 0, bytes = 0;               // what the directory holds now
};

class SnapshotDisk {
public:
    // Creates the directory if needed and indexes it. Throws ds4::Error when
    // the directory cannot be created or listed.
    explicit SnapshotDisk(SnapshotDiskOptions options);
    // Finishes every queued write (the server's shutdown flushes here).
    ~SnapshotDisk();
    SnapshotDisk(const SnapshotDisk&) = delete;
    SnapshotDisk& operator=(const SnapshotDisk&) = delete;

    // Queues a copy of the snapshot for writing; a snapshot whose tokens are
    // already stored, or larger than the whole budget, is not written.
    void store(const SessionSnapshot& snap);
    // The stored snapshot whose tokens are the longest prefix of `prompt`
    // with more than `at_least` and fewer than prompt.size() tokens, read
    // and verified; nullopt when none (a file that fails its checks is
    // dropped with a warning and the next shorter one tried).
    std::optional<SessionSnapshot> load(std::span<const int32_t> prompt, int64_t at_least);
    // Waits until every queued write is on disk.
    void flush();

    SnapshotDiskStats stats() const;

private:
    struct Entry {
        uint64_t n_tokens = 0;
        uint64_t tokens_hash = 0;
        uint64_t file_bytes = 0;
        int64_t last_used = 0;  // a counter: larger is more recent
    };
    void index();
    void writer_loop();
    void write_one(const SessionSnapshot& snap);
    void evict_to_fit(uint64_t incoming);  // with mu_ held
    void drop(const std::string& name, bool remove_file);  // with mu_ held
    std::string path_of(const std::string& name) const;

    SnapshotDiskOptions opts_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, Entry> entries_;  // by file name
    std::deque<SessionSnapshot> queue_;
    bool writing_ = false, stop_ = false;
    int64_t clock_ = 0;
    SnapshotDiskStats stats_;
    std::thread writer_;
};

}  // namespace ds4

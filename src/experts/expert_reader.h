// Reads routed experts' bytes from the model file, never through a
// mapping, so a file that fails or changes under a running process is an
// error for the step that needed the bytes (one sentence naming the file),
// never a SIGBUS nor a wrong token. A step's misses go out as one batch,
// all in flight at once: io_uring with O_DIRECT where the kernel and the
// file system allow it (a streamed model larger than RAM must not churn
// the page cache), else io_uring through the page cache, else a pool of
// pread threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/ssd_streaming.h"
#include "experts/file_reads.h"

namespace ds4 {

struct ReaderOptions {
    ReadMethod method = ReadMethod::automatic;
    bool direct = true;     // O_DIRECT when the file system takes it
    unsigned depth = 32;    // io_uring reads in flight
    unsigned threads = 8;   // pread workers
};

class ExpertReader {
public:
    // One exact byte range: `what` names it in an error ("expert 3 of
    // 'blk.1.ffn_up_exps.weight'").
    struct Request {
        uint64_t offset = 0, bytes = 0;
        uint8_t* dst = nullptr;
        std::string what;
    };

    // Opens `path` and remembers its size and modification time. Throws
    // ds4::Error when it cannot, or when `options` asks for io_uring and
    // the kernel refuses it.
    explicit ExpertReader(const std::string& path, const ReaderOptions& options = {});
    ~ExpertReader();
    ExpertReader(const ExpertReader&) = delete;
    ExpertReader& operator=(const ExpertReader&) = delete;

    // Exactly `bytes` bytes at `offset` into dst.
    void read(uint64_t offset, uint64_t bytes, uint8_t* dst, const std::string& what);
    // Every request, all in flight at once. Throws ds4::Error naming the
    // file and the first failed request's `what` on an I/O error, a short
    // read, or a file whose size or modification time changed since it was
    // opened; no read is still writing when it throws.
    //
    // Test hook: the environment variable DS4_TEST_FAIL_READ=N makes the
    // Nth request (from 1) of every reader fail as an I/O error would.
    void read_all(const std::vector<Request>& requests);

    // "io_uring, O_DIRECT, 32 reads in flight".
    std::string describe() const { return engine_->describe(); }
    // Counters another thread may read while reads run (a server's /metrics
    // while the read worker reads a step's misses).
    uint64_t reads() const { return reads_; }            // requests served
    uint64_t bytes_read() const { return bytes_; }
    double wait_seconds() const { return double(wait_ns_) * 1e-9; }  // wall time spent in reads

private:
    [[noreturn]] void fail(const std::string& why, const std::string& what) const;
    void check_unchanged(const std::string& what) const;

    int fd_ = -1;         // buffered: size checks, the pread pool
    int direct_fd_ = -1;  // O_DIRECT, when the file system takes it
    std::unique_ptr<FileReads> engine_;
    std::string path_;
    uint64_t size_ = 0;
    int64_t mtime_ns_ = 0;
    std::atomic<uint64_t> reads_{0}, bytes_{0};
    std::atomic<int64_t> wait_ns_{0};
    int64_t fail_at_ = 0;  // DS4_TEST_FAIL_READ, 0 when unset
};

}  // namespace ds4

// Batches of exact byte ranges read from one file, all in flight at once:
// the misses of one MoE step (three matrices per expert) or one block's
// whole routed tensors. Two engines behind one interface: io_uring (with
// O_DIRECT where the file system allows it, so a streamed model does not
// evict everything else from the page cache) and a pool of pread threads
// for kernels or sandboxes without io_uring.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds4 {

struct ReadSpan {
    uint64_t offset = 0;  // into the file
    uint64_t bytes = 0;
    uint8_t* dst = nullptr;
};

// Why a batch failed: the first span that did, and a sentence fragment
// ("Input/output error", "the file ended after N bytes, M bytes short").
struct ReadFailure {
    size_t span = 0;
    std::string why;
};

class FileReads {
public:
    virtual ~FileReads() = default;
    // Reads every span completely. Returns false and fills `failure` when
    // one could not be read; every read in flight has finished either way,
    // so the destinations are no longer written to.
    virtual bool run(const std::vector<ReadSpan>& spans, ReadFailure& failure) = 0;
    // "io_uring, O_DIRECT, 32 in flight" and the like, for the startup plan.
    virtual std::string describe() const = 0;
};

// io_uring on `fd` (not owned). `direct`: fd was opened with O_DIRECT, so
// reads go through aligned bounce buffers. Returns null when the kernel
// refuses io_uring (ENOSYS in some sandboxes, EPERM under seccomp).
std::unique_ptr<FileReads> make_uring_reads(int fd, bool direct, unsigned depth);

// `threads` pread workers on `fd` (not owned, buffered).
std::unique_ptr<FileReads> make_pread_reads(int fd, unsigned threads);

}  // namespace ds4

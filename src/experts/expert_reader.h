// Reads routed experts' bytes from the model file with pread, so a file that
// fails or changes under a running process is an error for the step that
// needed the bytes (one sentence naming the file), never a SIGBUS through a
// mapping nor a wrong token. SSD streaming's faster paths (io_uring,
// O_DIRECT) will sit behind this class.
#pragma once

#include <cstdint>
#include <string>

namespace ds4 {

class ExpertReader {
public:
    // Opens `path` for reading and remembers its size and modification
    // time. Throws ds4::Error when it cannot.
    explicit ExpertReader(const std::string& path);
    ~ExpertReader();
    ExpertReader(const ExpertReader&) = delete;
    ExpertReader& operator=(const ExpertReader&) = delete;

    // Exactly `bytes` bytes at `offset` into dst. Throws ds4::Error naming
    // the file and `what` on an I/O error, a short read, or a file whose
    // size or modification time changed since it was opened.
    //
    // Test hook: the environment variable DS4_TEST_FAIL_READ=N makes the
    // Nth read (from 1) of every reader fail as an I/O error would.
    void read(uint64_t offset, uint64_t bytes, uint8_t* dst, const std::string& what);

    uint64_t reads() const { return reads_; }

private:
    [[noreturn]] void fail(const std::string& why, const std::string& what) const;
    void check_unchanged(const std::string& what) const;

    int fd_ = -1;
    std::string path_;
    uint64_t size_ = 0;
    int64_t mtime_ns_ = 0;
    uint64_t reads_ = 0;
    int64_t fail_at_ = 0;  // DS4_TEST_FAIL_READ, 0 when unset
};

}  // namespace ds4

#include "experts/expert_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ds4 {

namespace {

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

// O_DIRECT where the file system honours it: some (tmpfs, overlay
// variants) refuse the open, others the first aligned read.
int open_direct(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) return -1;
    void* probe = std::aligned_alloc(4096, 4096);
    const ssize_t n = probe ? ::pread(fd, probe, 4096, 0) : -1;
    std::free(probe);
    if (n < 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

ExpertReader::ExpertReader(const std::string& path, const ReaderOptions& options) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error("cannot open " + path + " to read experts: " + std::strerror(errno) + ".");
    struct stat st {};
    if (fstat(fd_, &st) != 0) {
        const int e = errno;
        ::close(fd_);
        throw Error("cannot stat " + path + ": " + std::strerror(e) + ".");
    }
    size_ = uint64_t(st.st_size);
    mtime_ns_ = mtime_ns(st);
    if (const char* v = std::getenv("DS4_TEST_FAIL_READ")) fail_at_ = std::strtoll(v, nullptr, 10);
    if (options.method != ReadMethod::pread) {
        if (options.direct) direct_fd_ = open_direct(path);
        engine_ = make_uring_reads(direct_fd_ >= 0 ? direct_fd_ : fd_, direct_fd_ >= 0, options.depth);
        if (!engine_ && options.method == ReadMethod::uring) {
            if (direct_fd_ >= 0) ::close(direct_fd_);
            ::close(fd_);
            throw Error("--ssd-streaming-io io_uring: this kernel refuses io_uring (try --ssd-streaming-io pread).");
        }
    }
    if (!engine_) {
        if (direct_fd_ >= 0) ::close(direct_fd_);
        direct_fd_ = -1;
        engine_ = make_pread_reads(fd_, options.threads);
    }
}

ExpertReader::~ExpertReader() {
    engine_.reset();  // its workers and ring use the descriptors
    if (direct_fd_ >= 0) ::close(direct_fd_);
    if (fd_ >= 0) ::close(fd_);
}

void ExpertReader::fail(const std::string& why, const std::string& what) const {
    throw Error("reading " + what + " from " + path_ + " failed: " + why + ".");
}

// A file replaced or rewritten in place while it is in use would hand out
// other bytes than the ones the model was loaded with.
void ExpertReader::check_unchanged(const std::string& what) const {
    struct stat st {};
    if (fstat(fd_, &st) != 0) fail(std::strerror(errno), what);
    if (uint64_t(st.st_size) != size_ || mtime_ns(st) != mtime_ns_)
        fail("the file changed while in use (" + std::to_string(size_) + " bytes when loaded, " +
                 std::to_string(st.st_size) + " now)",
             what);
}

void ExpertReader::read(uint64_t offset, uint64_t bytes, uint8_t* dst, const std::string& what) {
    read_all({Request{offset, bytes, dst, what}});
}

void ExpertReader::read_all(const std::vector<Request>& requests) {
    if (requests.empty()) return;
    const uint64_t first = reads_.fetch_add(requests.size()) + 1;
    const uint64_t last = first + requests.size() - 1;
    if (fail_at_ > 0 && uint64_t(fail_at_) >= first && uint64_t(fail_at_) <= last)
        fail("Input/output error (DS4_TEST_FAIL_READ)", requests[size_t(uint64_t(fail_at_) - first)].what);
    check_unchanged(requests.front().what);
    std::vector<ReadSpan> spans;
    spans.reserve(requests.size());
    for (const Request& r : requests) {
        spans.push_back(ReadSpan{r.offset, r.bytes, r.dst});
        bytes_ += r.bytes;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ReadFailure failure;
    const bool ok = engine_->run(spans, failure);
    wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    if (!ok) fail(failure.why, requests[failure.span].what);
    // A change during the reads may have handed out mixed bytes.
    check_unchanged(requests.front().what);
}

}  // namespace ds4

#include "experts/expert_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace ds4 {

namespace {

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

}  // namespace

ExpertReader::ExpertReader(const std::string& path) : path_(path) {
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
}

ExpertReader::~ExpertReader() {
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
    ++reads_;
    if (fail_at_ > 0 && reads_ == uint64_t(fail_at_)) fail("Input/output error (DS4_TEST_FAIL_READ)", what);
    check_unchanged(what);
    uint64_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(fd_, dst + done, bytes - done, off_t(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail(std::strerror(errno), what);
        }
        if (n == 0)
            fail("the file ended after " + std::to_string(offset + done) + " bytes, " + std::to_string(bytes - done) +
                     " bytes short",
                 what);
        done += uint64_t(n);
    }
}

}  // namespace ds4

#include "mapping/model_identity.h"

#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/shard.h"

namespace ds4 {

namespace {
void hash_range(XXH3_state_t* st, int fd, uint64_t offset, uint64_t len, const std::string& path) {
    std::vector<char> buf(1 << 16);
    while (len > 0) {
        const size_t want = static_cast<size_t>(std::min<uint64_t>(len, buf.size()));
        const ssize_t got = ::pread(fd, buf.data(), want, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            throw Error("cannot read " + path + " to identify the model (" +
                        (got < 0 ? std::string(std::strerror(errno)) : std::string("the file is shorter than its header says")) + ").");
        XXH3_128bits_update(st, buf.data(), static_cast<size_t>(got));
        offset += static_cast<uint64_t>(got);
        len -= static_cast<uint64_t>(got);
    }
}
}  // namespace

std::string model_identity(const GgufFile& file) {
    // A shard (ds4-gguf split) is its source file for this purpose: stages
    // running shards of one model, or the model itself, recognize each other.
    if (const auto shard = shard_info(file)) return shard->source_identity;
    if (file.fd() < 0) throw Error("a model parsed from memory has no file to identify.");
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    try {
        const uint64_t size = file.file_size();
        XXH3_128bits_update(st, &size, sizeof size);
        hash_range(st, file.fd(), 0, file.data_offset(), file.path());
        // 32 samples of 64 KiB evenly over the data, the last one at its end.
        const uint64_t data = file.data_offset(), span = size > data ? size - data : 0;
        constexpr uint64_t kSample = 1 << 16;
        constexpr int kSamples = 32;
        if (span <= kSample * kSamples) {
            hash_range(st, file.fd(), data, span, file.path());
        } else {
            for (int i = 0; i < kSamples; ++i) {
                const uint64_t off = data + (span - kSample) * static_cast<uint64_t>(i) / (kSamples - 1);
                hash_range(st, file.fd(), off, kSample, file.path());
            }
        }
    } catch (...) {
        XXH3_freeState(st);
        throw;
    }
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    char out[40];
    std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return out;
}

}  // namespace ds4

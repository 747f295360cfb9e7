// A synthetic model built directly in memory: the GGUF writer's output in an
// anonymous memory file (memfd_create: no disk, no name in any directory),
// opened by path as /proc/self/fd/N so the normal GgufFile/ModelMap path
// maps it exactly like a file on disk (a benchmark then measures the code
// path of a real file, with page-cache-like shared memory behind it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "synth/bench_preset.h"

namespace ds4 {

class MemoryModelFile {
public:
    ~MemoryModelFile();
    MemoryModelFile(const MemoryModelFile&) = delete;
    MemoryModelFile& operator=(const MemoryModelFile&) = delete;

    const std::string& path() const { return path_; }  // /proc/self/fd/N, valid while this lives
    uint64_t bytes() const { return bytes_; }
    const SynthResult& result() const { return result_; }

    // Builds the preset's blocks [range.begin, range.end) (range checked by
    // the caller). Throws ds4::Error when memfd_create fails, when the file
    // would not fit in the memory the kernel reports available
    // (MemAvailable), or when writing fails.
    static std::unique_ptr<MemoryModelFile> build(const SyntheticPreset& preset, uint64_t seed, const LayerRange& range);

private:
    MemoryModelFile() = default;
    int fd_ = -1;
    std::string path_;
    uint64_t bytes_ = 0;
    SynthResult result_;
};

}  // namespace ds4

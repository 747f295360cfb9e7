#include "synth/memory_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/byte_size.h"
#include "common/error.h"
#include "common/host_memory.h"

namespace ds4 {

namespace {


}  // namespace

MemoryModelFile::~MemoryModelFile() {
    if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<MemoryModelFile> MemoryModelFile::build(const SyntheticPreset& preset, uint64_t seed,
                                                        const LayerRange& range) {
    std::unique_ptr<MemoryModelFile> m(new MemoryModelFile);
    m->fd_ = ::memfd_create("ds4-synthetic", MFD_CLOEXEC);
    if (m->fd_ < 0) throw Error(std::string("cannot create an in-memory file (memfd_create: ") + std::strerror(errno) + ").");
    // The writer and the reader both take a path; this one names the memfd.
    m->path_ = "/proc/self/fd/" + std::to_string(m->fd_);
    // A memfd lives in RAM (shmem): one larger than what is free would end
    // in the OOM killer, not in an error, so refuse it here.
    const auto fits = [&](uint64_t bytes) {
        const uint64_t avail = available_host_memory();
        if (avail != 0 && bytes > avail)
            throw Error("synthetic model " + preset.name + " (layers " + std::to_string(range.begin) + ":" +
                        std::to_string(range.end) + ") needs " + gib_text(double(bytes)) + " of memory, but only " +
                        gib_text(double(avail)) + " is available; run fewer layers with --layers.");
    };
    m->result_ = write_synthetic_model(preset, seed, range, m->path_, fits);
    m->bytes_ = m->result_.file_bytes;
    return m;
}

}  // namespace ds4

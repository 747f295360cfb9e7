#include "backend/cuda/op_profile.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace ds4::cuda {

namespace {
// Events enough for a few thousand decode steps of a large model; later ops
// run untimed rather than exhaust memory.
constexpr size_t kMaxEntries = 1 << 20;
}  // namespace

OpProfile::OpProfile() {
    const char* v = std::getenv("DS4_CUDA_PROFILE");
    enabled_ = v && *v && std::string(v) != "0";
}

OpProfile::~OpProfile() {
    for (auto& e : entries_) {
        if (e.start) cudaEventDestroy(e.start);
        if (e.stop) cudaEventDestroy(e.stop);
    }
}

OpProfile::Scope OpProfile::op(const std::string& name, uint64_t bytes, cudaStream_t stream) {
    if (!enabled_ || entries_.size() >= kMaxEntries) return Scope(nullptr, 0, stream);
    Entry e;
    e.name = name;
    e.bytes = bytes;
    if (cudaEventCreate(&e.start) != cudaSuccess || cudaEventCreate(&e.stop) != cudaSuccess) {
        cudaGetLastError();
        return Scope(nullptr, 0, stream);
    }
    cudaEventRecord(e.start, stream);
    entries_.push_back(e);
    return Scope(this, entries_.size() - 1, stream);
}

OpProfile::Scope::~Scope() {
    if (p_) cudaEventRecord(p_->entries_[index_].stop, stream_);
}

void OpProfile::report(std::FILE* out) {
    if (!enabled_ || entries_.empty()) return;
    cudaDeviceSynchronize();
    struct Sum {
        double ms = 0;
        uint64_t calls = 0, bytes = 0;
    };
    std::map<std::string, Sum> by_name;
    double total = 0;
    for (const auto& e : entries_) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, e.start, e.stop) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        Sum& s = by_name[e.name];
        s.ms += ms;
        s.calls += 1;
        s.bytes += e.bytes;
        total += ms;
    }
    std::vector<std::pair<std::string, Sum>> rows(by_name.begin(), by_name.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::fprintf(out, "cuda profile: %zu ops timed, %.3f ms in all (nested ops count in both)\n", entries_.size(), total);
    std::fprintf(out, "  %-28s %10s %6s %9s %10s %9s\n", "op", "ms", "share", "calls", "us/call", "GB/s");
    for (const auto& [name, s] : rows) {
        const double gbs = s.bytes && s.ms > 0 ? double(s.bytes) / (s.ms * 1e6) : 0.0;
        std::fprintf(out, "  %-28s %10.3f %5.1f%% %9llu %10.2f %9.1f\n", name.c_str(), s.ms, 100.0 * s.ms / total,
                     static_cast<unsigned long long>(s.calls), 1000.0 * s.ms / double(s.calls), gbs);
    }
}

}  // namespace ds4::cuda

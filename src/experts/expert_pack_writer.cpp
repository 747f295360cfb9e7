#include "experts/expert_pack_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"

namespace ds4 {

namespace {

// The tensor names of a block's parts, in PackPart order.
constexpr const char* kPartTensor[6] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
                                        "ffn_gate_exps.scale",  "ffn_up_exps.scale",  "ffn_down_exps.scale"};

// A block's tensors by part, found by name.
std::map<int, std::array<const GgufTensorInfo*, 6>> routed_tensors(const GgufFile& file) {
    std::map<int, std::array<const GgufTensorInfo*, 6>> out;
    for (const GgufTensorInfo& t : file.tensors()) {
        const int layer = tensor_layer(t.name);
        if (layer < 0) continue;
        const std::string prefix = "blk." + std::to_string(layer) + ".";
        for (int k = 0; k < 6; ++k)
            if (t.name == prefix + kPartTensor[k]) out[layer][size_t(k)] = &t;
    }
    return out;
}

void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
    while (n > 0) {
        const ssize_t put = ::write(fd, p, std::min<uint64_t>(n, uint64_t(1) << 30));
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) throw Error("cannot write " + path + ": " + std::strerror(put < 0 ? errno : ENOSPC) + ".");
        p += put;
        n -= uint64_t(put);
    }
}

void read_all(const GgufFile& file, uint8_t* dst, uint64_t n, uint64_t offset, const std::string& what) {
    while (n > 0) {
        const ssize_t got = ::pread(file.fd(), dst, n, off_t(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            throw Error("cannot read " + what + " from " + file.path() + ": " +
                        (got < 0 ? std::string(std::strerror(errno)) : std::string("the file ended early")) + ".");
        dst += got;
        n -= uint64_t(got);
        offset += uint64_t(got);
    }
}

// The source of one part: where expert 0's bytes are, and the stride.
struct PartSource {
    uint64_t offset = 0, stride = 0;
};

}  // namespace

PackLayout plan_expert_pack(const GgufFile& file, const std::string& identity) {
    PackLayout l;
    l.identity = identity;
    for (const auto& [layer, t] : routed_tensors(file)) {
        const std::string where = file.path() + "'s block " + std::to_string(layer);
        if (!t[0] && !t[1] && !t[2]) continue;  // only scales: not a block pack can serve
        if (!t[0] || !t[1] || !t[2])
            throw Error(where + " lacks one of ffn_gate_exps, ffn_up_exps and ffn_down_exps.");
        PackBlock b;
        b.layer = layer;
        b.n_expert = t[0]->ne[2];
        for (int k = 0; k < 3; ++k) {
            const GgufTensorInfo& w = *t[size_t(k)];
            if (w.n_dims != 3 || w.ne[2] != b.n_expert || w.ne[2] < 1 || w.nbytes % uint64_t(w.ne[2]) != 0)
                throw Error(where + ": '" + w.name + "' is not one matrix per expert for " + std::to_string(b.n_expert) +
                            " experts.");
            b.parts.push_back(PackPartLayout{PackPart(k), w.type, 0, w.nbytes / uint64_t(w.ne[2]), w.name});
        }
        for (int k = 3; k < 6; ++k) {
            const GgufTensorInfo* s = t[size_t(k)];
            if (!s || s->n_elements() == 1) continue;  // none, or one value for every expert (it stays in the GGUF)
            if (s->type != GgmlType::F32 || s->n_elements() != b.n_expert)
                throw Error(where + ": '" + s->name + "' is not one f32 per expert.");
            b.parts.push_back(PackPartLayout{PackPart(k), s->type, 0, sizeof(float), s->name});
        }
        l.blocks.push_back(std::move(b));
    }
    if (l.blocks.empty())
        throw Error(file.path() + " has no routed experts (blk.N.ffn_gate_exps/ffn_up_exps/ffn_down_exps.weight) to pack.");
    pack_layout(l);
    return l;
}

PackWriteStats write_expert_pack(const GgufFile& file, const std::string& identity, const std::string& out) {
    const auto t0 = std::chrono::steady_clock::now();
    const PackLayout l = plan_expert_pack(file, identity);
    const auto tensors = routed_tensors(file);
    const std::string tmp = out + ".tmp-" + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create " + tmp + ": " + std::strerror(errno) + ".");
    PackWriteStats stats;
    try {
        uint64_t header_sum = 0;
        const std::string header = encode_pack_header(l, header_sum);
        write_all(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), tmp);
        std::vector<uint64_t> sums;
        sums.reserve(l.n_records());
        std::vector<uint8_t> src, records;
        for (const PackBlock& b : l.blocks) {
            const auto& t = tensors.at(b.layer);
            // Experts a batch: each part's range for them is one long read
            // (a part's experts are contiguous in its tensor), the records
            // one long write.
            const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(b.n_expert, int64_t(kPackCopyBytes / b.record_bytes)));
            for (int64_t e0 = 0; e0 < b.n_expert; e0 += batch) {
                const int64_t n = std::min(batch, b.n_expert - e0);
                records.assign(uint64_t(n) * b.record_bytes, 0);
                for (const PackPartLayout& p : b.parts) {
                    const GgufTensorInfo& w = *t[size_t(p.kind)];
                    src.resize(uint64_t(n) * p.bytes);
                    read_all(file, src.data(), src.size(), w.file_offset + uint64_t(e0) * p.bytes, "'" + w.name + "'");
                    for (int64_t i = 0; i < n; ++i)
                        std::memcpy(records.data() + uint64_t(i) * b.record_bytes + p.offset, src.data() + uint64_t(i) * p.bytes,
                                    p.bytes);
                }
                for (int64_t i = 0; i < n; ++i)
                    sums.push_back(pack_record_checksum(records.data() + uint64_t(i) * b.record_bytes, b.record_bytes));
                write_all(fd, records.data(), records.size(), tmp);
            }
        }
        const std::string trailer = encode_pack_trailer(sums, header_sum);
        write_all(fd, reinterpret_cast<const uint8_t*>(trailer.data()), trailer.size(), tmp);
        if (::fsync(fd) != 0) throw Error("cannot write " + tmp + ": " + std::strerror(errno) + ".");
        const int closed = ::close(fd);
        fd = -1;
        if (closed != 0) throw Error("cannot write " + tmp + ": " + std::strerror(errno) + ".");
        stats.records = sums.size();
        stats.bytes = l.file_bytes;
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (std::rename(tmp.c_str(), out.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        throw Error("cannot write " + out + ": " + std::strerror(e) + ".");
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return stats;
}

}  // namespace ds4

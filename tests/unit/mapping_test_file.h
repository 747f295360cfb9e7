// Test support for the mapping tests: writes small GGUF v3 files whose
// tensor layout (sizes, gaps, order) the test chooses byte by byte, which
// GgufWriter (always packed) cannot do. Every tensor is I8, one dimension,
// so any byte count is a valid tensor; data bytes are random.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mapping_test {

struct TensorSpec {
    std::string name;
    uint64_t nbytes = 0;
    uint64_t gap = 0;  // unowned bytes after the previous tensor, before aligning
};

struct PlacedTensor {
    std::string name;
    uint64_t file_offset = 0;  // absolute
    uint64_t nbytes = 0;
};

struct WrittenFile {
    std::string path;
    uint64_t file_size = 0;
    uint64_t data_offset = 0;
    std::vector<PlacedTensor> tensors;  // in data order (the order of the specs)
};

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/ds4-mapping-test-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class Bytes {
public:
    void u32(uint32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    void str(const std::string& s) { u64(s.size()); raw(s.data(), s.size()); }
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        buf.insert(buf.end(), b, b + n);
    }
    std::vector<uint8_t> buf;
};

// The header, tensor table and layout of a GGUF v3 file. The tensor table
// lists the tensors in a random order when `shuffle_table` is set (data
// order is always the specs' order), so code that assumes table order = data
// order is caught.
inline WrittenFile layout_gguf(const std::string& path, const std::vector<TensorSpec>& specs, std::mt19937_64& rng,
                               uint64_t alignment, uint64_t tail, bool shuffle_table, std::vector<uint8_t>& header) {
    constexpr uint32_t kTypeI8 = 24, kValueU32 = 4;
    WrittenFile out;
    out.path = path;

    // Data-relative offsets first: they go into the tensor table.
    std::vector<uint64_t> rel(specs.size());
    uint64_t cur = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
        rel[i] = align_up(cur + specs[i].gap, alignment);
        cur = rel[i] + specs[i].nbytes;
    }
    std::vector<size_t> table(specs.size());
    for (size_t i = 0; i < table.size(); ++i) table[i] = i;
    if (shuffle_table) std::shuffle(table.begin(), table.end(), rng);

    Bytes h;
    h.raw("GGUF", 4);
    h.u32(3);
    h.u64(specs.size());
    h.u64(alignment == 32 ? 0 : 1);
    if (alignment != 32) {
        h.str("general.alignment");
        h.u32(kValueU32);
        h.u32(static_cast<uint32_t>(alignment));
    }
    for (size_t i : table) {
        h.str(specs[i].name);
        h.u32(1);
        h.u64(specs[i].nbytes);
        h.u32(kTypeI8);
        h.u64(rel[i]);
    }
    out.data_offset = align_up(h.buf.size(), alignment);
    out.file_size = out.data_offset + cur + tail;
    for (size_t i = 0; i < specs.size(); ++i)
        out.tensors.push_back(PlacedTensor{specs[i].name, out.data_offset + rel[i], specs[i].nbytes});
    header = std::move(h.buf);
    return out;
}

// Writes a GGUF v3 file whose every byte after the header is random.
inline WrittenFile write_gguf(const std::string& path, const std::vector<TensorSpec>& specs, std::mt19937_64& rng,
                              uint64_t alignment = 32, uint64_t tail = 0, bool shuffle_table = false) {
    std::vector<uint8_t> header;
    WrittenFile out = layout_gguf(path, specs, rng, alignment, tail, shuffle_table, header);
    std::vector<uint8_t> file(out.file_size);
    std::memcpy(file.data(), header.data(), header.size());
    for (size_t i = header.size(); i + 8 <= file.size(); i += 8) {
        const uint64_t r = rng();
        std::memcpy(&file[i], &r, 8);
    }
    for (size_t i = std::max(header.size(), file.size() / 8 * 8); i < file.size(); ++i)
        file[i] = static_cast<uint8_t>(rng());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
    return out;
}

// Writes only the header and extends the file to its full size without
// writing data: a sparse file, so a model of hundreds of GiB costs no disk.
inline WrittenFile write_sparse_gguf(const std::string& path, const std::vector<TensorSpec>& specs,
                                     std::mt19937_64& rng, uint64_t tail = 0) {
    std::vector<uint8_t> header;
    WrittenFile out = layout_gguf(path, specs, rng, 32, tail, false, header);
    {
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
        if (!f) throw std::runtime_error("cannot write " + path);
    }
    std::filesystem::resize_file(path, out.file_size);
    return out;
}

// Bytes [offset, offset+size) of a file, read with pread (not mmap): the
// reference the mapped bytes are compared with.
inline std::vector<uint8_t> pread_bytes(const std::string& path, uint64_t offset, uint64_t size) {
    std::vector<uint8_t> out(size);
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + path);
    uint64_t got = 0;
    while (got < size) {
        const ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(offset + got));
        if (n <= 0) break;
        got += static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (got != size) throw std::runtime_error("short pread of " + path);
    return out;
}

// Lines of /proc/self/maps whose path is `path`: one per mapping (VMA).
inline int mappings_of(const std::string& path) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    int n = 0;
    while (std::getline(maps, line))
        if (line.size() > path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0 &&
            line[line.size() - path.size() - 1] == ' ')
            ++n;
    return n;
}

// A llama.cpp-style MoE layer: the tensor names DeepSeek V4 / Qwen3-MoE
// files carry, in the order converters write them.
inline std::vector<std::string> layer_tensor_names(int layer) {
    static const char* kNames[] = {
        "attn_norm.weight",      "attn_q_a.weight",      "attn_q_a_norm.weight", "attn_q_b.weight",
        "attn_kv_a_mqa.weight",  "attn_kv_a_norm.weight", "attn_output.weight",  "ffn_norm.weight",
        "ffn_gate_inp.weight",   "exp_probs_b.bias",     "ffn_gate_exps.weight", "ffn_up_exps.weight",
        "ffn_down_exps.weight",  "ffn_down_exps.scale",  "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
        "ffn_down_shexp.weight",
    };
    std::vector<std::string> out;
    for (const char* n : kNames) out.push_back("blk." + std::to_string(layer) + "." + n);
    return out;
}

inline bool is_expert_name(const std::string& name) { return name.find("_exps.") != std::string::npos; }

}  // namespace mapping_test

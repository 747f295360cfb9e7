// GGUF v2/v3 reader. Parses the header (metadata + tensor table) with strict
// validation and keeps the file open; tensor bytes are never read or copied
// here: the model map (src/mapping) maps the regions a process needs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace ds4 {

constexpr int kGgufMaxDims = 4;
// The file's first four bytes, "GGUF" read as a little-endian u32.
constexpr uint32_t kGgufMagic = 0x46554747;

struct GgufTensorInfo {
    std::string name;
    GgmlType type = GgmlType::F32;
    uint32_t n_dims = 0;
    int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ggml order: ne[0] is the row length
    uint64_t offset = 0;       // relative to the data section, as stored
    uint64_t file_offset = 0;  // absolute position in the file
    uint64_t nbytes = 0;

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    size_t row_bytes() const;
};

class GgufFile {
public:
    // Opens and validates a file. Throws ds4::Error with one sentence naming
    // the file and the problem.
    static std::unique_ptr<GgufFile> open(const std::string& path);
    // Parses a header held in memory (tests, fuzzing). `size` is the size of
    // the whole file the bytes stand for; tensor data must lie inside it.
    static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);

    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::string& path() const { return path_; }
    int fd() const { return fd_; }  // -1 for parsed-from-memory files
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
    uint64_t file_size() const { return file_size_; }

    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
    const GgufValue* find(const std::string& key) const;

    // Typed look-ups. The optional forms return nullopt when the key is absent
    // and throw when it exists with an incompatible type; require_* throw when
    // absent ("file F lacks metadata key K.").
    std::optional<uint64_t> get_uint(const std::string& key) const;
    std::optional<int64_t> get_int(const std::string& key) const;
    std::optional<double> get_float(const std::string& key) const;
    std::optional<bool> get_bool(const std::string& key) const;
    std::optional<std::string> get_string(const std::string& key) const;
    uint64_t require_uint(const std::string& key) const;
    double require_float(const std::string& key) const;
    std::string require_string(const std::string& key) const;
    const GgufValue& require_array(const std::string& key) const;
    std::string architecture() const { return require_string("general.architecture"); }

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(const std::string& name) const;
    const GgufTensorInfo& require_tensor(const std::string& name) const;
    uint64_t tensor_data_bytes() const;  // sum of all tensors' nbytes

private:
    GgufFile() = default;
    friend class GgufParser;

    std::string path_;
    int fd_ = -1;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    uint64_t file_size_ = 0;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::vector<GgufTensorInfo> tensors_;
    std::vector<size_t> kv_index_sorted_;      // indices into kv_, sorted by key
    std::vector<size_t> tensor_index_sorted_;  // indices into tensors_, sorted by name
};

}  // namespace ds4

// GGUF v3 writer: metadata (every value type), tensor infos, aligned data.
// Used by `ds4-gguf synth`, by tests that build files, and by tools that
// rewrite files (e.g. dropping tensors). Tensor data is streamed to disk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace ds4 {

class GgufWriter {
public:
    explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

    void set(const std::string& key, GgufValue v);  // replaces an existing key, keeps order otherwise

    // Declares a tensor; `ne` in ggml order (ne[0] = row length), up to 4 dims.
    // `fill` is called once while writing with a buffer of exactly nbytes.
    void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                    std::function<void(uint8_t* dst, size_t nbytes)> fill);
    // Convenience: a tensor whose bytes are already in memory (copied).
    void add_tensor_bytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                          std::vector<uint8_t> bytes);

    // Writes the file; throws ds4::Error naming the path on I/O failure.
    void write(const std::string& path) const;
    // The whole file in memory (tests and fuzz seeds).
    std::vector<uint8_t> to_bytes() const;

private:
    struct Tensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        size_t nbytes;
        std::function<void(uint8_t*, size_t)> fill;
    };
    uint64_t alignment_;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::vector<Tensor> tensors_;
};

}  // namespace ds4

// GGUF v3 writer: metadata (every value type), tensor infos, aligned data.
// Used by `ds4-gguf synth`, by tests that build files, and by tools that
// rewrite files (e.g. dropping tensors). Tensor data is streamed to disk.
//
// Layout is the one ggml's own writer produces (gguf_write_to_file): header,
// metadata in insertion order, tensor infos in insertion order, zero padding
// to the alignment, then each tensor's bytes followed by zero padding to the
// alignment. For the same content and alignment 32 the bytes are identical.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace ds4 {

class GgufByteSink;  // where emitted bytes go (file, memory, counter)

class GgufWriter {
public:
    // `alignment` must be a power of two that fits in u32; when it is not the
    // GGUF default (32) the key general.alignment is written, as the format
    // requires. Setting general.alignment later changes the alignment too.
    explicit GgufWriter(uint64_t alignment = 32);

    // Replaces an existing key (keeping its position), appends otherwise.
    // Throws ds4::Error when the value is malformed: a scalar out of its
    // type's range, an array whose elements are not in the vector its element
    // type selects, an empty key, or a bad general.alignment.
    void set(const std::string& key, GgufValue v);

    // Declares a tensor; `ne` in ggml order (ne[0] = row length), 1 to 4 dims.
    // `fill` is called once while writing with a buffer of exactly nbytes.
    // Throws ds4::Error for a duplicate or over-long name (ggml allows at
    // most 63 bytes), a bad shape, or a row that is not a whole number of blocks.
    void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                    std::function<void(uint8_t* dst, size_t nbytes)> fill);
    // Like add_tensor, for tensors too large to hold at once: `fill` is
    // called for consecutive chunks (offset within the tensor, buffer, length)
    // of at most kStreamChunkBytes each, in order.
    static constexpr size_t kStreamChunkBytes = size_t{16} << 20;
    void add_tensor_streamed(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                             std::function<void(uint64_t offset, uint8_t* dst, size_t n)> fill);
    // Convenience: a tensor whose bytes are already in memory (copied);
    // bytes.size() must equal the tensor's size.
    void add_tensor_bytes(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                          std::vector<uint8_t> bytes);

    uint64_t alignment() const { return alignment_; }
    size_t tensor_count() const { return tensors_.size(); }
    // Size of the file write() produces.
    uint64_t file_size() const;

    // Writes the file; throws ds4::Error naming the path on I/O failure
    // (the partial file is removed). Exceptions from fill callbacks pass
    // through, also after removing the partial file.
    void write(const std::string& path) const;
    // The whole file in memory (tests and fuzz seeds).
    std::vector<uint8_t> to_bytes() const;

private:
    struct Tensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        size_t nbytes;
        std::function<void(uint8_t*, size_t)> fill;                 // whole tensor, or
        std::function<void(uint64_t, uint8_t*, size_t)> fill_range;  // chunk by chunk
    };
    void emit(GgufByteSink& out) const;
    Tensor& declare(const std::string& name, GgmlType type, std::vector<int64_t> ne);

    uint64_t alignment_;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::vector<Tensor> tensors_;
};

}  // namespace ds4

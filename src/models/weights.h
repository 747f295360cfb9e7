// Binding GGUF tensors to WeightRefs with shape and type checks, shared by
// families: every problem is one sentence naming the file and the tensor
// (whose name holds the layer), and for a wrong dimension the metadata key
// that set the expected size.
#pragma once

#include <initializer_list>
#include <string>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/hparams.h"

namespace ds4 {

// One expected dimension: its size and where the size comes from ("" for a
// fixed size): a metadata key, a product of keys, another tensor's rows.
// Converts from a plain number, so shapes read {E, n_ff, X}.
struct Dim {
    int64_t n;
    std::string from;
    Dim(int64_t size) : n(size) {}  // NOLINT: implicit on purpose
    Dim(int64_t size, std::string source) : n(size), from(std::move(source)) {}
};

class WeightBinder {
public:
    WeightBinder(const GgufFile& file, ModelMap& map);

    // The tensor `name` with exactly the shape `ne` (ggml order; trailing
    // dims of 1 may be omitted), of a type ds4 computes with.
    WeightRef require(const std::string& name, std::initializer_list<Dim> ne);
    // Same, but an absent tensor gives an empty WeightRef.
    WeightRef optional(const std::string& name, std::initializer_list<Dim> ne);
    // Optional F32 scale tensor with n elements (llama.cpp's ".scale").
    WeightRef optional_scale(const std::string& name, Dim n);
    // A table of i32 values (routing tables) of exactly shape `ne`,
    // little-endian and 4-byte aligned in the file (ops read it in place).
    // The values are the caller's to check.
    WeightRef require_i32(const std::string& name, std::initializer_list<Dim> ne);

    // Whether the tensors required from now on are bound to their bytes
    // (default) or only checked: a pipeline stage checks the whole file's
    // shapes but binds (and so maps) only what it runs, e.g. no output head
    // in a stage without the last block. Unbound WeightRefs have no data.
    void bind_data(bool on) { bind_data_ = on; }
    // Whether routed-expert tensors are bound to their bytes (default) or
    // only described (shape, type, file offset), for an expert source that
    // reads them from the file itself; the map then need not hold them.
    void experts_resident(bool on) { experts_resident_ = on; }

    // Dimension d of a required tensor, for sizes only the tensors give
    // (the vocabulary, an expert width a file does not state): 1 to
    // kMaxHparamCount.
    int64_t dim(const std::string& name, int d);
    // The file is a shard (ds4-gguf split): tensors outside its slice are
    // absent, and an unbound require() of one gives an empty WeightRef.
    bool shard() const { return shard_; }

private:
    WeightRef bind(const GgufTensorInfo& t, std::initializer_list<Dim> ne);
    void check_shape(const GgufTensorInfo& t, std::initializer_list<Dim> ne) const;
    const GgufFile& file_;
    ModelMap& map_;
    bool bind_data_ = true;
    bool experts_resident_ = true;
    bool shard_ = false;
};

// The vocabulary size: the rows of token_embd.weight, which must agree with
// "<arch>.vocab_size" and hold every id of the tokenizer's token list when
// the file has them (a larger list would give ids the embedding lacks).
int64_t bind_vocab_size(const Hparams& hp, WeightBinder& wb);

}  // namespace ds4

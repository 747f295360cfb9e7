// A model family: hyper-parameters from GGUF metadata, weights bound to the
// model map, and a forward pass written once in terms of backend ops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"

namespace ds4 {

struct ModelInfo {
    std::string arch;
    std::string name;
    int64_t n_vocab = 0;
    int64_t n_embd = 0;
    int n_layer = 0;
    int64_t n_ctx_train = 0;
};

// Per-session state a family keeps between calls (KV caches, ...). Opaque to
// callers except for its size and snapshot support.
class ModelState {
public:
    virtual ~ModelState() = default;
    virtual int64_t n_ctx() const = 0;
    virtual uint64_t bytes() const = 0;
    // Whether the state of positions [0, to) is still intact after the
    // cache held n_past positions, so evaluation may resume at `to`. A plain
    // KV cache keeps every position; ring buffers do not.
    virtual bool can_rewind(int64_t to, int64_t n_past) const { return to <= n_past; }
    // Every tensor the state consists of, for snapshots: copying these (and
    // the position) captures the session exactly.
    virtual std::vector<Tensor*> tensors() = 0;
};

class Model {
public:
    virtual ~Model() = default;
    virtual const ModelInfo& info() const = 0;
    virtual std::unique_ptr<ModelState> new_state(Backend& backend, int64_t n_ctx) const = 0;
    // Runs tokens at positions [pos0, pos0 + n) and returns logits: of every
    // position ([n x n_vocab]) when all_logits, else of the last one only.
    virtual Tensor forward(Backend& backend, ModelState& state, const int32_t* tokens, int64_t n, int64_t pos0,
                           bool all_logits) const = 0;
};

// Loads the family named by general.architecture, binding its tensors to
// `map`. Throws ds4::Error naming the file and the problem.
std::unique_ptr<Model> load_model(const GgufFile& file, ModelMap& map);

// The architectures load_model knows.
std::vector<std::string> supported_architectures();

}  // namespace ds4

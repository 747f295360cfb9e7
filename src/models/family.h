// A model family: hyper-parameters from GGUF metadata, weights bound to the
// model map, and a forward pass written once in terms of backend ops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
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
    int n_layer = 0;          // blocks of the model
    LayerRange layers;        // blocks this process runs, resolved: [layers.begin, layers.end)
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

// What one forward pass evaluates: tokens at positions [pos0, pos0 + n),
// on the host and, for the ops, in backend memory.
struct StepInputs {
    const int32_t* tokens = nullptr;  // host
    int64_t n = 0;
    int64_t pos0 = 0;
    IntArray token_ids;  // the same n tokens, backend copy
    IntArray positions;  // pos0 .. pos0 + n - 1, backend copy
};

// Which transformer blocks a process runs, plus the token embedding and the
// output head. Tensors of other blocks are not bound, so the model map never
// maps them.
struct LoadOptions {
    LayerRange layers;
};

class Model {
public:
    virtual ~Model() = default;
    virtual const ModelInfo& info() const = 0;
    virtual std::unique_ptr<ModelState> new_state(Backend& backend, int64_t n_ctx) const = 0;
    // Runs the step's tokens and returns logits: of every position
    // ([n x n_vocab]) when all_logits, else of the last one only.
    virtual Tensor forward(Backend& backend, ModelState& state, const StepInputs& in, bool all_logits) const = 0;
    // True when a one-token forward pass issues the same ops at every
    // position, reading the token and position only from in.token_ids and
    // in.positions, so a backend may record it once and replay it.
    virtual bool replayable_decode() const { return false; }
};

// Loads the family named by general.architecture, binding the tensors of
// the chosen layers to `map`. Throws ds4::Error naming the file and the
// problem (also for a layer range outside the model).
std::unique_ptr<Model> load_model(const GgufFile& file, ModelMap& map, const LoadOptions& opts = {});
// The checked, resolved block range of `opts` for a model of n_layer blocks;
// throws ds4::Error naming `path` when it does not fit.
LayerRange layer_range(const LoadOptions& opts, int n_layer, const std::string& path);

// The architectures load_model knows.
std::vector<std::string> supported_architectures();

}  // namespace ds4

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
#include "experts/expert_source.h"
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

// The state a family keeps between forward passes (KV caches, ...) for
// n_slots sequences of up to n_ctx positions each. Opaque to callers except
// for its size, rewinding and snapshots.
class ModelState {
public:
    virtual ~ModelState() = default;
    virtual int64_t n_ctx() const = 0;  // positions per sequence slot
    virtual int n_slots() const { return 1; }
    virtual uint64_t bytes() const = 0;
    // Whether the state of positions [0, to) is still intact after the
    // cache held n_past positions, so evaluation may resume at `to`. A plain
    // KV cache keeps every position; ring buffers do not.
    virtual bool can_rewind(int64_t to, int64_t n_past) const { return to <= n_past; }
    // What the first n_past positions of sequence slot `slot` wrote, as
    // views on the state's tensors, for snapshots: copying these (and the
    // position) captures that sequence exactly, in bytes that grow with
    // n_past rather than with the context.
    virtual std::vector<Tensor> slot_tensors(int slot, int64_t n_past) = 0;
};

// One forward pass: rows of (sequence slot, position, token), of one or
// many sequences, and the rows whose logits are wanted. The ids live in
// backend memory, filled before the step, so a recorded step reads the new
// step's values from the same place at every replay.
struct Batch {
    int64_t n = 0;                       // rows
    IntArray token_ids;                  // [n]
    CacheRows cache;                     // positions and slots [n]; slot_rows = the state's n_ctx
    int64_t n_logits = 0;
    IntArray logit_rows;                 // [n_logits] rows whose logits the step returns, in this order
    // Host copies of tokens, positions and slots, for families that still
    // decide on the host (DeepSeek V4 today). Null while a step is being
    // recorded: a replayable family must not read them.
    const int32_t* host_tokens = nullptr;
    const int32_t* host_positions = nullptr;
    const int32_t* host_slots = nullptr;
};

// Which transformer blocks a process runs, plus the token embedding and the
// output head. Tensors of other blocks are not bound, so the model map never
// maps them.
struct LoadOptions {
    LayerRange layers;
    // Whether routed experts are bound to the model map's bytes (the
    // resident source) or only described, for an expert source that reads
    // them from the file (RoutedExperts).
    bool resident_experts = true;
};

class Model {
public:
    virtual ~Model() = default;
    virtual const ModelInfo& info() const = 0;
    // State for n_slots sequences of up to n_ctx positions each
    // (1 <= n_slots <= max_slots()).
    virtual std::unique_ptr<ModelState> new_state(Backend& backend, int64_t n_ctx, int n_slots = 1) const = 0;
    // How many sequences one state can hold, so one forward pass runs rows
    // of all of them.
    virtual int max_slots() const { return 1; }
    // A stage: the model runs its blocks (info().layers). The stage that
    // starts at block 0 embeds the batch's tokens (hidden_in null); a later
    // stage continues from the previous stage's hidden rows
    // [batch.n x hidden_cols()]. The stage holding the last block and the
    // head returns the logits of batch.logit_rows ([n_logits x n_vocab],
    // through head()); any other stage returns the hidden rows of every
    // batch row, for the next stage (same process, another GPU or another
    // host) or, after the last block, for a coordinator that owns the head.
    virtual Tensor forward(Backend& backend, ModelState& state, const Batch& batch,
                           const Tensor* hidden_in = nullptr) const = 0;
    // The output head over rows `logit_rows` (n_logits of them) of the
    // final hidden state [rows x hidden_cols()] (after the last block):
    // their logits [n_logits x n_vocab]. The one implementation of each
    // family's head: forward() ends with it, and a pipeline coordinator
    // that owns the head (--layers 0:B,output) applies it to the hidden
    // rows its last worker returns. Throws ds4::Error when this process was
    // loaded without the head.
    virtual Tensor head(Backend& backend, const Tensor& hidden, const IntArray& logit_rows,
                        int64_t n_logits) const = 0;
    // Width of the hidden state between stages: the residual stream (all
    // hyper-connection streams for DeepSeek V4).
    virtual int64_t hidden_cols() const = 0;
    // True when a forward pass of a given shape (rows, logit rows) issues
    // the same ops whatever the tokens, positions and slots, reading them
    // only from the batch's backend arrays, so a backend may record it once
    // and replay it.
    virtual bool replayable_decode() const { return false; }

    // The routed experts of each block this process runs that has them, as
    // bound, for building an expert source.
    virtual std::vector<RoutedExperts> routed_experts() const = 0;
    // Where forward() finds the chosen experts: the resident source (the
    // bound tensors) until another is set. A model loaded without resident
    // experts needs one before its first forward pass.
    void set_expert_source(std::shared_ptr<ExpertSource> source) { experts_ = std::move(source); }
    ExpertSource& expert_source() const { return *experts_; }

private:
    std::shared_ptr<ExpertSource> experts_ = std::make_shared<ResidentExperts>();
};

// Throws ds4::Error unless this process owns the output head (head()).
void check_owns_head(const ModelInfo& info);

// Throws ds4::Error unless `hidden_in` suits a stage running `info`'s
// blocks: absent for the stage that embeds (block 0), [n x cols] otherwise.
void check_stage_input(const ModelInfo& info, const Tensor* hidden_in, int64_t n, int64_t cols);

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

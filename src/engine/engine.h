// The engine: the only API programs see. It opens a model (file, backend,
// layer slice, weight placement) in one call, chooses the chat template,
// and hands out sessions that evaluate tokens; the CLI, ds4-bench and later
// the server and pipeline workers are thin clients of it. No backend's own
// header and no tensor internals cross this line.
//
// Startup lines (backend choice, model map, tensor check) go to the log
// sink (common/log.h), not to stderr directly.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat.h"
#include "common/layer_range.h"
#include "common/ssd_streaming.h"
#include "engine/backend_factory.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "experts/expert_source.h"

namespace ds4 {

class GgufFile;
class ModelMap;
class Model;
struct ModelInfo;
class Tokenizer;
class ExpertCache;
class ExpertWindowSource;

struct EngineOptions {
    std::string model;         // GGUF path
    BackendOptions backend;    // "auto" (default), "cpu" or "cuda"; threads; device; host-registered weights
    LayerRange layers;         // the blocks this process runs (default: all, with embedding and head)
    bool check_tensors = false;  // read every selected weight once and refuse NaN/Inf (--check-tensors)
    // The routed experts' weight source: resident in the model map (unset,
    // the default), or an expert cache of this many slots (0: one per
    // expert) filled from the file, so the map holds no routed expert.
    std::optional<int64_t> expert_cache_slots;
    SsdStreaming ssd_streaming;  // sizes such a cache from a budget, and logs the plan
    // Chat: whether this process renders conversations at all (false for raw
    // token ids, e.g. --dump-logits), and which template: "" for the one the
    // file names, a renderer name, or "raw".
    bool chat = true;
    std::string chat_template;
};

class Engine {
public:
    // Backend first (no GPU is one sentence before the file is read), then
    // the file, the chat template (a model ds4 cannot talk to fails before
    // its weights load), the model map, the model, the weights on the
    // backend. Throws ds4::Error with one sentence.
    static std::unique_ptr<Engine> open(const EngineOptions& options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const ModelInfo& info() const;
    const GgufFile& file() const;
    const std::string& backend_description() const;
    const std::string& map_summary() const;
    // The routed experts' source: "experts: ..." as logged at open, and
    // what it did so far ("" for resident experts).
    std::string expert_source_description() const;
    std::string expert_source_stats() const;
    ExpertSourceStats expert_stats() const;

    // The vocabulary; throws ds4::Error when the file carries none.
    const Tokenizer& tokenizer() const;
    // The renderer chosen at open ("raw" included); "" when chat is off.
    const std::string& chat_template() const { return chat_template_; }
    // BOS (when the vocabulary adds one) and the tokens of the conversation
    // rendered with the chosen template.
    std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;

    // A new sequence of up to n_ctx tokens on this engine's model and
    // backend. With an expert cache, prefill chunks shrink to what the cache
    // can serve at once (chunk x experts per token <= slots).
    std::unique_ptr<Session> new_session(const SessionOptions& options) const;
    // The most rows one forward pass may hold for the expert cache to serve
    // it (rows x experts per token <= slots); 0 when unbounded.
    int64_t max_prefill_chunk() const { return max_prefill_chunk_; }
    // Continuous batching over options.n_slots sequences (engine/scheduler.h);
    // throws ds4::Error when the file carries no vocabulary.
    std::unique_ptr<Scheduler> new_scheduler(const SchedulerOptions& options) const;

    // A pipeline coordinator: the stages after this process's layer slice
    // (pipeline/). Sessions and schedulers made from then on run their
    // steps through it and return the route's logits. Throws ds4::Error
    // when this process already holds the output head.
    void set_route(std::shared_ptr<Downstream> route);
    bool has_route() const { return route_ != nullptr; }

    // For tests and benchmarks that drive the model directly.
    const Model& model() const { return *model_; }
    const ModelMap& map() const { return *map_; }
    Backend& backend() const { return *backend_; }

private:
    Engine() = default;
    std::unique_ptr<Backend> backend_;
    // --ssd-streaming with expert windows: the source, its warm start.
    void open_windows(const SsdStreaming& s, const std::vector<RoutedExperts>& blocks, int64_t slots);
    std::string backend_description_;
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<ModelMap> map_;
    std::string map_summary_;
    std::unique_ptr<Model> model_;
    std::string chat_template_;
    int64_t max_prefill_chunk_ = 0;  // 0: no limit
    std::shared_ptr<Downstream> route_;
    mutable std::unique_ptr<Tokenizer> tokenizer_;
    // --ssd-streaming-profile: the cache whose routing counts are written
    // to profile_ at exit.
    std::shared_ptr<ExpertCache> expert_cache_;
    std::shared_ptr<ExpertWindowSource> expert_windows_;  // or these, with windows
    std::string profile_, identity_;
};

}  // namespace ds4

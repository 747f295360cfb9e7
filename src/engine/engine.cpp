#include "engine/engine.h"

#include <cstdio>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/chat_prompt.h"
#include "experts/expert_cache.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/check_tensors.h"
#include "models/family.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

std::unique_ptr<Engine> Engine::open(const EngineOptions& o) {
    std::unique_ptr<Engine> e(new Engine());
    BackendChoice choice = make_backend(o.backend);
    e->backend_ = std::move(choice.backend);
    e->backend_description_ = std::move(choice.description);

    e->file_ = GgufFile::open(o.model);
    if (o.chat) {
        const ChatTemplateChoice chat = choose_chat_template(*e->file_, o.chat_template);
        if (!chat.warning.empty()) log_warning(chat.warning);
        e->chat_template_ = chat.name;
    }
    MapSelection selection;
    selection.layers = o.layers;
    // A stage maps the embedding only when it starts at block 0 and the head
    // only when it holds the last block (the embedding too when it is the
    // head: tied embeddings). Without block_count the loader says so below.
    if (const auto n_layer = e->file_->get_uint(e->file_->architecture() + ".block_count")) {
        const bool has_head = o.layers.has_output(static_cast<int>(*n_layer));
        selection.output = has_head;
        selection.embedding = o.layers.has_embedding() || (has_head && !e->file_->find_tensor("output.weight"));
    }
    const bool cached_experts = o.expert_cache_slots.has_value();
    selection.routed_experts = !cached_experts;
    e->map_ = ModelMap::build(*e->file_, selection);
    LoadOptions load;
    load.layers = o.layers;
    load.resident_experts = !cached_experts;
    e->model_ = load_model(*e->file_, *e->map_, load);
    TensorCheckStats checked;
    if (o.check_tensors)
        checked = check_tensor_values(*e->file_, *e->map_, selection,
                                      o.backend.threads > 0 ? o.backend.threads
                                                            : static_cast<int>(std::thread::hardware_concurrency()));
    // Printed once the model is known good: a file that fails to load gets
    // the loader's sentence alone.
    e->map_summary_ = e->map_->summary();
    log_info(e->backend_description_);
    log_info(e->map_summary_);
    if (o.check_tensors) {
        char line[160];
        std::snprintf(line, sizeof line, "check-tensors: %llu tensors (%.2f GiB), every value finite",
                      static_cast<unsigned long long>(checked.tensors),
                      static_cast<double>(checked.bytes) / double(uint64_t{1} << 30));
        log_info(line);
    }
    e->backend_->attach_weights(*e->map_);
    if (cached_experts) {
        e->model_->set_expert_source(
            std::make_shared<ExpertCache>(*e->backend_, *e->map_, e->model_->routed_experts(), *o.expert_cache_slots));
        log_info(e->model_->expert_source().describe());
    }
    return e;
}

Engine::~Engine() = default;

const ModelInfo& Engine::info() const { return model_->info(); }
const GgufFile& Engine::file() const { return *file_; }
const std::string& Engine::backend_description() const { return backend_description_; }
const std::string& Engine::map_summary() const { return map_summary_; }
std::string Engine::expert_source_description() const { return model_->expert_source().describe(); }

const Tokenizer& Engine::tokenizer() const {
    if (!tokenizer_) tokenizer_ = Tokenizer::from_gguf(*file_);
    return *tokenizer_;
}

std::vector<int32_t> Engine::chat_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
    if (chat_template_.empty()) throw Error("this engine was opened without chat (raw token ids only).");
    return prompt_token_ids(tokenizer(), render_chat(chat_template_, messages, options));
}

std::unique_ptr<Session> Engine::new_session(const SessionOptions& options) const {
    return std::make_unique<Session>(*model_, *backend_, options);
}

std::unique_ptr<Scheduler> Engine::new_scheduler(const SchedulerOptions& options) const {
    return std::make_unique<Scheduler>(*model_, *backend_, tokenizer(), options);
}

}  // namespace ds4

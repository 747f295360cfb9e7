#include "engine/engine.h"
#include "mapping/shard.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/byte_size.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "common/log.h"
#include "engine/chat_prompt.h"
#include "experts/expert_cache.h"
#include "experts/expert_windows.h"
#include "experts/routing_profile.h"
#include "gguf/gguf_file.h"
#include "mapping/model_identity.h"
#include "mapping/model_map.h"
#include "models/check_tensors.h"
#include "models/family.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {

int64_t total_experts(const std::vector<RoutedExperts>& blocks) {
    int64_t n = 0;
    for (const RoutedExperts& b : blocks) n += b.n_expert();
    return n;
}

// Experts each token's router picks (the family's expert_used_count); 0 when
// the file does not say.
int64_t experts_per_token(const GgufFile& file) {
    return static_cast<int64_t>(file.get_uint(file.architecture() + ".expert_used_count").value_or(0));
}

// Slots for a budget of `experts` or `bytes` (as asked), else automatic:
// half of `avail` (less `simulated`, --simulate-used-memory) less `reserve`;
// at most `total`. `how` says which, with the simulated figure, and, when
// `avail` is host memory, whether the memory cgroup set it.
int64_t budget_slots(uint64_t experts, uint64_t bytes, uint64_t avail, bool host_memory, uint64_t simulated,
                     uint64_t reserve, uint64_t slot, int64_t total, const char* where, std::string& how) {
    if (experts > 0) {
        how = "as asked";
        return int64_t(std::min<uint64_t>(experts, uint64_t(total)));
    }
    if (bytes > 0) {
        how = "from the " + std::to_string(bytes >> 20) + " MiB asked";
        return int64_t(std::min<uint64_t>(bytes / slot, uint64_t(total)));
    }
    const uint64_t left = avail > simulated ? avail - simulated : 0;
    how = "automatic: half of " + size_text(double(left)) + " " + where;
    if (simulated > 0)
        how += " (" + size_text(double(avail)) + " less " + size_text(double(simulated)) +
               " --simulate-used-memory)";
    how += " less " + size_text(double(reserve));
    if (host_memory)
        if (const std::string note = host_memory_limit_note(); !note.empty()) how += " (" + note + ")";
    return int64_t(std::min<uint64_t>((left > reserve ? (left - reserve) / 2 : 0) / slot, uint64_t(total)));
}

// The cache's slot count for --ssd-streaming, and the plan logged with it:
// what stays resident (`map`), what one expert costs, the budget (automatic:
// from what `backend` can still allocate), the working set.
int64_t streaming_slots(const Backend& backend, const ModelMap& map, const SsdStreaming& s,
                        const std::vector<RoutedExperts>& blocks, int64_t used) {
    const int64_t total = total_experts(blocks);
    const uint64_t slot = ExpertCache::slot_bytes_for(blocks);
    if (total == 0 || slot == 0) {
        log_info("ssd-streaming: this model (slice) has no routed experts; every weight is resident.");
        return 0;
    }
    const int64_t working_set = int64_t(blocks.size()) * used;
    // The automatic budget keeps 2 GiB for the state and scratch the
    // sessions allocate later.
    std::string how;
    // The CPU's available memory is the host's.
    int64_t slots = budget_slots(s.experts, s.bytes, backend.available_memory(), backend.reads_attached_buffers_in_place(),
                                 s.simulated_used, uint64_t(2) << 30, slot, total, "available", how);
    if (slots < 1) {
        // Any budget works (misses go to scratch slots); less than one
        // expert is read as one.
        log_warning("ssd-streaming: the budget holds no whole expert (" + size_text(double(slot)) +
                    " each); caching one.");
        slots = 1;
    }
    char line[640];
    std::snprintf(line, sizeof line,
                  "ssd-streaming: %s resident without routed experts; %lld routed experts of %s in the file; cache "
                  "%lld experts (%s, %s); working set %lld experts per token (%zu MoE blocks x %lld)",
                  size_text(double(map.mapped_bytes())).c_str(), static_cast<long long>(total),
                  size_text(double(slot)).c_str(), static_cast<long long>(slots),
                  size_text(double(slots) * double(slot)).c_str(), how.c_str(), static_cast<long long>(working_set),
                  blocks.size(), static_cast<long long>(used));
    log_info(line);
    if (slots < 2 * working_set && slots < total)
        log_warning("ssd-streaming: the cache holds less than twice the working set per token; most tokens will "
                    "read experts from the disk.");
    return slots;
}

// The host tier's slots: none where the backend computes from host memory
// (the CPU: its cache is in RAM already) or the device cache holds every
// expert; else as asked, or automatic: half of the available RAM less
// 4 GiB, at most every expert (every read passes through the tier, so it
// holds the device's experts too: only a tier of all of them keeps the
// disk out of a warm run).
int64_t host_tier_slots(const Backend& backend, const SsdStreaming& s, const std::vector<RoutedExperts>& blocks,
                        int64_t device_slots) {
    const uint64_t slot = ExpertCache::slot_bytes_for(blocks);
    const int64_t left = total_experts(blocks);
    if (backend.reads_attached_buffers_in_place() || s.host_off || slot == 0 || device_slots >= left) return 0;
    std::string how;
    const int64_t n = budget_slots(s.host_experts, s.host_bytes, available_host_memory(), true, s.simulated_used,
                                   uint64_t(4) << 30, slot, left, "of RAM available", how);
    log_info("ssd-streaming: host tier " + std::to_string(n) + " experts (" + size_text(double(n) * double(slot)) + ", " +
             how + ")");
    return n;
}

// Whether --ssd-streaming keeps the routed experts in expert windows
// (experts/expert_windows.h): as asked, or automatically where the backend
// reads host memory over a link (CUDA), the host tier would hold every
// expert and the device budget would not, and no routing trace is asked for
// (the trace is the expert cache's).
bool use_windows(const Backend& backend, const SsdStreaming& s, const std::vector<RoutedExperts>& blocks,
                 int64_t device_slots, int64_t host_slots) {
    if (s.windows == ExpertWindowsMode::off || blocks.empty()) return false;
    if (s.windows == ExpertWindowsMode::on) {
        if (!s.trace_out.empty())
            throw Error("--ssd-streaming-trace-out records the expert cache's steps; it cannot be used with "
                        "--ssd-streaming-windows on.");
        return true;
    }
    // Measured on an H100 (Qwen3-30B-A3B q4_k_m, half the experts on the
    // GPU, one swap a step): decode 58-77 t/s against the cache's 51-63 once
    // the slots are full, 2.4x llama.cpp -ot exps=CPU; slower only while they
    // fill (53 vs 62 t/s over the first 128 tokens of a 16-token prompt,
    // equal after a 512-token one) and on the prompt chunks of a long prompt
    // (983 vs 1,412 t/s at 2,048 tokens). bench/RESULTS.md, 2026-12-07
    // fourth and fifth sessions.
    const int64_t total = total_experts(blocks);
    return !backend.reads_attached_buffers_in_place() && host_slots >= total && device_slots < total &&
           s.trace_out.empty();
}

}  // namespace

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
    // A stage maps the embedding only when it starts at block 0 and the head
    // only when it owns it (the embedding too when it is the head: tied
    // embeddings). Without block_count the loader says so below.
    MapSelection selection = stage_selection(*e->file_, o.layers);
    if (const auto n_layer = e->file_->get_uint(e->file_->architecture() + ".block_count"))
        check_shard_layers(*e->file_, o.layers, static_cast<int>(*n_layer));
    const bool cached_experts = o.expert_cache_slots.has_value() || o.ssd_streaming.enabled;
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
        const std::vector<RoutedExperts> blocks = e->model_->routed_experts();
        const int64_t used = experts_per_token(*e->file_);
        int64_t slots = o.expert_cache_slots.value_or(0);
        if (o.ssd_streaming.enabled) slots = streaming_slots(*e->backend_, *e->map_, o.ssd_streaming, blocks, used);
        ExpertCacheOptions co;
        if (o.ssd_streaming.enabled) co.host_slots = host_tier_slots(*e->backend_, o.ssd_streaming, blocks, slots);
        if (o.ssd_streaming.enabled && use_windows(*e->backend_, o.ssd_streaming, blocks, slots, co.host_slots)) {
            e->open_windows(o.ssd_streaming, blocks, slots);
            return e;
        }
        co.slots = slots;
        co.experts_per_token = used;
        co.prefill = o.ssd_streaming.prefill;
        co.reader.method = o.ssd_streaming.io;
        co.overlap = o.ssd_streaming.overlap;
        co.lookahead = o.ssd_streaming.lookahead;
        co.pack = o.ssd_streaming.pack;
        co.trace_out = o.ssd_streaming.trace_out;
        auto cache = std::make_shared<ExpertCache>(*e->backend_, *e->map_, blocks, co);
        e->model_->set_expert_source(cache);
        log_info(cache->describe());
        // Per expert only: a chunk of k tokens asks a block for up to k x used
        // experts at once, which must fit the slots and scratch. Otherwise a
        // chunk that does not fit reads whole blocks.
        const int64_t capacity = cache->slots() + cache->scratch_slots();
        if (o.ssd_streaming.prefill == PrefillStrategy::per_expert && used > 0 && capacity > 0)
            e->max_prefill_chunk_ = std::max<int64_t>(1, capacity / used);
        if (!o.ssd_streaming.trace_out.empty()) e->expert_cache_ = cache;
        if (!o.ssd_streaming.profile.empty()) {
            e->expert_cache_ = cache;
            e->profile_ = o.ssd_streaming.profile;
            e->identity_ = model_identity(*e->file_);
            std::string warning;
            const ExpertCounts counts = read_routing_profile(e->profile_, e->identity_, warning);
            if (!warning.empty()) log_warning("ssd-streaming: " + warning);
            std::vector<std::pair<int, int64_t>> hot = hottest_first(counts);
            if (o.ssd_streaming.preload && uint64_t(*o.ssd_streaming.preload) < hot.size())
                hot.resize(size_t(*o.ssd_streaming.preload));
            if (!hot.empty()) {
                cache->preload(*e->backend_, hot);
                log_info("ssd-streaming: preloaded the hottest experts of " + e->profile_ + " (" +
                         std::to_string(std::min<size_t>(hot.size(), size_t(cache->slots()))) + " at most)");
            }
        }
    }
    return e;
}

void Engine::open_windows(const SsdStreaming& s, const std::vector<RoutedExperts>& blocks, int64_t slots) {
    // A budget in bytes (automatic or NGB) counts whole windows, which the
    // backend rounds up to its mapping granularity; one in experts is kept.
    const uint64_t content = ExpertWindowSource::window_bytes_for(blocks);
    const uint64_t window = backend_->expert_window_bytes(content);
    if (s.experts == 0 && window > content) slots = int64_t(uint64_t(slots) * ExpertCache::slot_bytes_for(blocks) / window);
    ExpertWindowOptions wo;
    wo.device_slots = slots;
    // DS4_WINDOW_SWAPS=N[:RATIO[:MARGIN]]: the policy's swaps a step and
    // their threshold, for the benchmarks that choose the defaults (a swap
    // costs two remaps of ~0.2 ms each on CUDA: bench/NOTES.md).
    if (const char* v = std::getenv("DS4_WINDOW_SWAPS")) {
        long long n = wo.policy.swaps_per_step;
        double ratio = wo.policy.swap_ratio, margin = wo.policy.swap_margin;
        if (std::sscanf(v, "%lld:%lf:%lf", &n, &ratio, &margin) < 1 || n < 0 || ratio < 0 || margin < 0)
            throw Error(std::string("DS4_WINDOW_SWAPS='") + v + "' is not N[:RATIO[:MARGIN]] with N, RATIO, MARGIN >= 0.");
        wo.policy.swaps_per_step = n;
        wo.policy.swap_ratio = ratio;
        wo.policy.swap_margin = margin;
        log_info("ssd-streaming: window swaps " + std::to_string(n) + " a step, above " + std::to_string(ratio) +
                 " x coldest + " + std::to_string(margin) + " (DS4_WINDOW_SWAPS)");
    }
    if (!s.pack.empty()) log_info("ssd-streaming: windows are filled from the model file; the pack is not read.");
    auto windows = std::make_shared<ExpertWindowSource>(*backend_, *map_, blocks, wo);
    model_->set_expert_source(windows);
    log_info(windows->describe());
    if (s.profile.empty()) return;
    expert_windows_ = windows;
    profile_ = s.profile;
    identity_ = model_identity(*file_);
    std::string warning;
    const ExpertCounts counts = read_routing_profile(profile_, identity_, warning);
    if (!warning.empty()) log_warning("ssd-streaming: " + warning);
    std::vector<std::pair<int, int64_t>> hot = hottest_first(counts);
    if (s.preload && uint64_t(*s.preload) < hot.size()) hot.resize(size_t(*s.preload));
    if (hot.empty()) return;
    windows->preload(*backend_, hot);
    log_info("ssd-streaming: moved the hottest experts of " + profile_ + " into device memory (" +
             std::to_string(windows->promoted()) + ")");
}

Engine::~Engine() {
    // The routing trace's trailer: a run that ends here ends its trace.
    if (expert_cache_) {
        try {
            expert_cache_->finish_trace();
        } catch (const Error& err) {
            log_warning(std::string("ssd-streaming: ") + err.what());
        }
    }
    // The routing counts of this run, added to the profile for the next.
    if ((expert_cache_ || expert_windows_) && !profile_.empty()) {
        try {
            write_routing_profile(profile_, identity_,
                                  expert_cache_ ? expert_cache_->routing_counts() : expert_windows_->routing_counts());
        } catch (const Error& err) {
            log_warning(std::string("ssd-streaming: ") + err.what());
        }
    }
}

ExpertSourceStats Engine::expert_stats() const { return model_->expert_source().stats(); }

const ModelInfo& Engine::info() const { return model_->info(); }
const GgufFile& Engine::file() const { return *file_; }
const std::string& Engine::backend_description() const { return backend_description_; }
const std::string& Engine::map_summary() const { return map_summary_; }
std::string Engine::expert_source_description() const { return model_->expert_source().describe(); }
std::string Engine::expert_source_stats() const { return model_->expert_source().stats_line(); }

const Tokenizer& Engine::tokenizer() const {
    if (!tokenizer_) tokenizer_ = Tokenizer::from_gguf(*file_);
    return *tokenizer_;
}

std::vector<int32_t> Engine::chat_prompt(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
    if (chat_template_.empty()) throw Error("this engine was opened without chat (raw token ids only).");
    return prompt_token_ids(tokenizer(), render_chat(chat_template_, messages, options));
}

std::unique_ptr<Session> Engine::new_session(const SessionOptions& options) const {
    SessionOptions o = options;
    if (max_prefill_chunk_ > 0) o.prefill_chunk = std::min(o.prefill_chunk, max_prefill_chunk_);
    o.route = route_;
    return std::make_unique<Session>(*model_, *backend_, o);
}

std::unique_ptr<Scheduler> Engine::new_scheduler(const SchedulerOptions& options) const {
    SchedulerOptions o = options;
    o.route = route_;
    return std::make_unique<Scheduler>(*model_, *backend_, tokenizer(), o);
}

void Engine::set_route(std::shared_ptr<Downstream> route) {
    if (route && info().layers.has_last_block(info().n_layer))
        throw Error("this process runs the model's last block, so no pipeline stage can follow it.");
    route_ = std::move(route);
}

}  // namespace ds4

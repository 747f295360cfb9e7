#include "server/metrics.h"

#include <cstdio>

namespace ds4 {

namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

void sample(std::string& out, const char* name, uint64_t v) {
    out += name;
    out += ' ';
    out += std::to_string(v);
    out += '\n';
}

std::string seconds_text(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6f", v);
    return b;
}

// A label value: backslash, double quote and newline escaped.
std::string label(const std::string& v) {
    std::string s;
    for (char c : v) {
        if (c == '\\' || c == '"') s += '\\';
        if (c == '\n') {
            s += "\\n";
            continue;
        }
        s += c;
    }
    return s;
}

}  // namespace

void Metrics::Histogram::observe(double v) {
    for (size_t i = 0; i < kBuckets.size(); ++i)
        if (v <= kBuckets[i]) {
            ++counts[i];
            break;
        }
    ++count;
    sum += v;
}

void Metrics::Histogram::render(std::string& out, const char* name, const char* help) const {
    header(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
        cumulative += counts[i];
        out += std::string(name) + "_bucket{le=\"" + number(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
    out += std::string(name) + "_sum " + number(sum) + "\n";
    out += std::string(name) + "_count " + std::to_string(count) + "\n";
}

void Metrics::count_request(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_[{endpoint, status}];
}

void Metrics::record_generation(const GenerateResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
    ++generations_;
    prompt_tokens_ += static_cast<uint64_t>(r.prompt_tokens);
    cached_tokens_ += static_cast<uint64_t>(r.cached_tokens);
    generated_tokens_ += r.tokens.size();
}

void Metrics::observe_time_to_first_token(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    ttft_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    itl_.observe(seconds);
}

std::string Metrics::render(const std::optional<SchedulerStats>& s) const {
    std::string out;
    std::lock_guard<std::mutex> lock(mu_);
    header(out, "ds4_model_loaded", "gauge", "1 once the model is loaded and requests are served, 0 while it loads.");
    sample(out, "ds4_model_loaded", s ? 1 : 0);
    header(out, "ds4_requests_total", "counter", "HTTP responses sent, by endpoint and status code.");
    for (const auto& [key, n] : requests_)
        out += "ds4_requests_total{endpoint=\"" + label(key.first) + "\",status=\"" + std::to_string(key.second) +
               "\"} " + std::to_string(n) + "\n";
    header(out, "ds4_generations_total", "counter", "Generations ended, whatever the reason.");
    sample(out, "ds4_generations_total", generations_);
    header(out, "ds4_prompt_tokens_total", "counter", "Prompt tokens of the generations (usage prompt tokens).");
    sample(out, "ds4_prompt_tokens_total", prompt_tokens_);
    header(out, "ds4_cached_prompt_tokens_total", "counter", "Prompt tokens reused from a slot or the prefix cache.");
    sample(out, "ds4_cached_prompt_tokens_total", cached_tokens_);
    header(out, "ds4_generated_tokens_total", "counter", "Tokens sampled (usage completion/output tokens).");
    sample(out, "ds4_generated_tokens_total", generated_tokens_);
    ttft_.render(out, "ds4_time_to_first_token_seconds", "From a request's submission to the scheduler to its first streamed text.");
    itl_.render(out, "ds4_inter_token_latency_seconds", "Between consecutive pieces of streamed text of a request.");
    if (!s) return out;
    header(out, "ds4_prefill_tokens_total", "counter", "Prompt tokens evaluated by forward passes (rate(): prefill tokens/s).");
    sample(out, "ds4_prefill_tokens_total", s->prefill_tokens);
    header(out, "ds4_decode_tokens_total", "counter", "Tokens fed by decode rows of forward passes (rate(): decode tokens/s).");
    sample(out, "ds4_decode_tokens_total", s->decode_tokens);
    header(out, "ds4_forward_passes_total", "counter", "Batched forward passes (scheduler steps).");
    sample(out, "ds4_forward_passes_total", s->steps);
    header(out, "ds4_scheduler_seconds_total", "counter",
           "The scheduler thread's wall time by part: forward passes (all, and those with a prefill chunk), "
           "admitting requests (slot choice, snapshot restores), prompt snapshots copied out for the prefix cache.");
    out += "ds4_scheduler_seconds_total{part=\"forward\"} " + seconds_text(s->forward_seconds) + "\n";
    out += "ds4_scheduler_seconds_total{part=\"forward_with_prefill\"} " + seconds_text(s->prefill_forward_seconds) + "\n";
    out += "ds4_scheduler_seconds_total{part=\"admit\"} " + seconds_text(s->admit_seconds) + "\n";
    out += "ds4_scheduler_seconds_total{part=\"snapshot\"} " + seconds_text(s->snapshot_seconds) + "\n";
    header(out, "ds4_prefix_cache_snapshots_total", "counter", "Prompt snapshots copied out for the prefix cache.");
    sample(out, "ds4_prefix_cache_snapshots_total", s->snapshots);
    header(out, "ds4_prefix_cache_snapshots_aside_total", "counter",
           "Of those, snapshots staged in backend memory and downloaded off the scheduler's thread.");
    sample(out, "ds4_prefix_cache_snapshots_aside_total", s->snapshots_aside);
    header(out, "ds4_longest_step_seconds", "gauge", "The longest scheduler step so far (admission, forward pass, sampling).");
    out += "ds4_longest_step_seconds " + seconds_text(s->longest_step_seconds) + "\n";
    header(out, "ds4_prefix_cache_hits_total", "counter",
           "Requests that resumed a cached prompt prefix: the slot's live sequence, a RAM snapshot, a disk one, or "
           "another running request's slot (fork).");
    out += "ds4_prefix_cache_hits_total{source=\"slot\"} " + std::to_string(s->slot_hits) + "\n";
    out += "ds4_prefix_cache_hits_total{source=\"ram\"} " + std::to_string(s->snapshot_hits) + "\n";
    out += "ds4_prefix_cache_hits_total{source=\"disk\"} " + std::to_string(s->disk_hits) + "\n";
    out += "ds4_prefix_cache_hits_total{source=\"fork\"} " + std::to_string(s->fork_hits) + "\n";
    if (s->disk) {
        header(out, "ds4_kv_disk_files", "gauge", "Snapshot files in the disk KV cache (--kv-disk-dir).");
        sample(out, "ds4_kv_disk_files", s->disk->files);
        header(out, "ds4_kv_disk_bytes", "gauge", "Bytes of those files.");
        sample(out, "ds4_kv_disk_bytes", s->disk->bytes);
        header(out, "ds4_kv_disk_read_bytes_total", "counter", "Bytes of snapshot files read back for requests.");
        sample(out, "ds4_kv_disk_read_bytes_total", s->disk->bytes_read);
        header(out, "ds4_kv_disk_written_bytes_total", "counter", "Bytes of snapshot files written.");
        sample(out, "ds4_kv_disk_written_bytes_total", s->disk->bytes_written);
        header(out, "ds4_kv_disk_evictions_total", "counter", "Snapshot files removed to stay within --kv-disk-space-mb.");
        sample(out, "ds4_kv_disk_evictions_total", s->disk->evictions);
        header(out, "ds4_kv_disk_failures_total", "counter", "Snapshot files that failed to write or to load (dropped).");
        out += "ds4_kv_disk_failures_total{op=\"store\"} " + std::to_string(s->disk->store_failures) + "\n";
        out += "ds4_kv_disk_failures_total{op=\"load\"} " + std::to_string(s->disk->load_failures) + "\n";
    }
    header(out, "ds4_kv_slots_in_use", "gauge", "Sequence slots holding a request.");
    sample(out, "ds4_kv_slots_in_use", static_cast<uint64_t>(s->active));
    header(out, "ds4_kv_slots", "gauge", "Sequence slots in all (--parallel).");
    sample(out, "ds4_kv_slots", static_cast<uint64_t>(s->slots));
    header(out, "ds4_queue_depth", "gauge", "Requests waiting for a slot.");
    sample(out, "ds4_queue_depth", s->queued);
    return out;
}

}  // namespace ds4

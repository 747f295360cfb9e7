#include "engine/generate.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

int32_t sample_next(Sampler& sampler, std::span<const float> logits, const Tokenizer& tokenizer, bool ignore_eos,
                    std::vector<float>& scratch) {
    if (!ignore_eos) return sampler.sample(logits);
    scratch.assign(logits.begin(), logits.end());
    for (int32_t id : tokenizer.eog_ids())
        if (id >= 0 && static_cast<size_t>(id) < scratch.size()) scratch[static_cast<size_t>(id)] = -INFINITY;
    return sampler.sample(scratch);
}

int candidates_for(const Sampler& sampler, const Tokenizer& tokenizer, bool ignore_eos, bool logprobs, int64_t n_vocab) {
    const int need = sampler.candidates_needed();
    if (need <= 0 || logprobs) return 0;
    const int64_t k = int64_t(need) + (ignore_eos ? int64_t(tokenizer.eog_ids().size()) : 0);
    return k < n_vocab && k <= Backend::kMaxTopK ? int(k) : 0;
}

int32_t sample_next(Sampler& sampler, const Candidates& best, const Tokenizer& tokenizer, bool ignore_eos) {
    if (!ignore_eos) return sampler.sample(best);
    // The banned tokens leave the list, so the rest is the best of the row
    // with them at -infinity. A NaN anywhere still fails the row (the
    // candidates cannot tell whether one outside the banned ids follows).
    Candidates kept;
    for (size_t i = 0; i < best.ids.size(); ++i) {
        if (tokenizer.is_eog(best.ids[i])) continue;
        kept.ids.push_back(best.ids[i]);
        kept.logits.push_back(best.logits[i]);
    }
    kept.first_bad = best.first_bad;
    if (kept.ids.empty()) throw Error("every candidate token is an end token, which ignore_eos bans.");
    return sampler.sample(kept);
}

const char* finish_reason(StopReason reason) {
    switch (reason) {
        case StopReason::end_of_generation:
        case StopReason::stop_string: return "stop";
        case StopReason::max_tokens:
        case StopReason::context_full: return "length";
        case StopReason::cancelled: return "cancelled";
        case StopReason::failed: return "error";
    }
    return "stop";
}

GenerateResult generate(Session& session, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateCallbacks& callbacks) {
    if (prompt.empty()) throw Error("the prompt is empty: nothing to continue from.");
    if (static_cast<int64_t>(prompt.size()) >= session.n_ctx())
        throw Error("the prompt needs " + std::to_string(prompt.size()) + " tokens but the context holds " +
                    std::to_string(session.n_ctx()) + "; raise --ctx.");
    std::optional<Sampler> own;
    if (!options.sampler) own.emplace(options.sampling);  // checks the parameters before any work
    if (options.top_logprobs > kMaxTopLogprobs)
        throw Error("top_logprobs is " + std::to_string(options.top_logprobs) + ", but at most " +
                    std::to_string(kMaxTopLogprobs) + " alternatives can be reported.");
    Sampler& sampler = options.sampler ? *options.sampler : *own;
    GenerateResult r;
    r.prompt_tokens = static_cast<int64_t>(prompt.size());
    r.cached_tokens = session.reuse_prefix(prompt, options.prefix_cache);
    const auto t0 = Clock::now();
    std::vector<float> logits = session.eval(prompt.subspan(static_cast<size_t>(r.cached_tokens)), false, callbacks.on_prefill);
    r.prefill_seconds = seconds_since(t0);
    if (options.prefix_cache) options.prefix_cache->store(session);

    ReplyText reply(tokenizer, options.stop);
    std::vector<float> banned;  // the logits with end tokens banned (ignore_eos)
    bool cancelled = false;
    auto emit = [&](const std::string& text) {
        if (text.empty() || cancelled) return;
        r.text += text;
        if (callbacks.on_text && !callbacks.on_text(text)) cancelled = true;
    };
    // Past the prompt, each step's logits stay on the backend where the
    // sampler can draw from the row's best tokens alone (Candidates).
    const int best_k = candidates_for(sampler, tokenizer, options.ignore_eos, options.top_logprobs >= 0,
                                      session.n_vocab());
    Candidates best;
    const auto t1 = Clock::now();
    r.reason = StopReason::max_tokens;
    for (;;) {
        if (options.max_tokens >= 0 && static_cast<int64_t>(r.tokens.size()) >= options.max_tokens) break;
        if (session.n_past() >= session.n_ctx()) {
            r.reason = StopReason::context_full;
            break;
        }
        const int32_t id = best.empty() ? sample_next(sampler, logits, tokenizer, options.ignore_eos, banned)
                                        : sample_next(sampler, best, tokenizer, options.ignore_eos);
        r.tokens.push_back(id);
        if (options.top_logprobs >= 0) r.logprobs.push_back(sampled_logprobs(logits, id, options.top_logprobs));
        const bool end = tokenizer.is_eog(id);
        if (end) {
            if (options.eval_end_token && session.n_past() < session.n_ctx())
                session.eval(std::span<const int32_t>(&id, 1), false);
            r.reason = StopReason::end_of_generation;
            break;
        }
        emit(reply.push(id));
        if (reply.stopped()) {
            r.reason = StopReason::stop_string;
            break;
        }
        if (cancelled) {
            r.reason = StopReason::cancelled;
            break;
        }
        logits = session.decode(id, best_k, &best);
    }
    // The tail (ReplyText::finish).
    if (!reply.stopped() && !cancelled) {
        const std::string tail = reply.finish();
        if (reply.stopped()) r.reason = StopReason::stop_string;
        emit(tail);
    }
    if (cancelled) r.reason = StopReason::cancelled;
    if (r.reason == StopReason::stop_string) r.stop_string = reply.matched_stop();
    r.decode_seconds = seconds_since(t1);
    return r;
}

}  // namespace ds4

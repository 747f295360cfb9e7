#include "generate.h"

#include <readline/history.h>
#include <readline/readline.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "chat/chat.h"
#include "common/error.h"
#include "engine/generate.h"
#include "engine/session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {

namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

void install_sigint() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
}


// The CLI's chat loop over one engine session: the conversation so far is
// re-rendered each turn and the session keeps whatever prefix of it the
// cache still holds (Session::reuse_prefix).
struct Chat {
    Engine& engine;
    const Ds4Options& opts;
    std::unique_ptr<Session> session;
    Sampler sampler;

    static SamplerParams sampler_params(const Ds4Options& o) {
        SamplerParams p;
        p.temperature = o.temp;
        p.top_k = o.top_k;
        p.top_p = o.top_p;
        p.min_p = o.min_p;
        if (o.seed) p.seed = *o.seed;
        return p;
    }

    static SessionOptions session_options(const Ds4Options& o) {
        SessionOptions s;
        s.n_ctx = o.ctx;
        s.prefill_chunk = o.prefill_chunk;
        s.prefill_window = o.dist_prefill_window;  // used only along a pipeline route
        return s;
    }

    Chat(Engine& e, const Ds4Options& o) : engine(e), opts(o), session(e.new_session(session_options(o))), sampler(sampler_params(o)) {}

    std::vector<int32_t> prompt(const std::vector<ChatMessage>& messages) const {
        ChatOptions co;
        co.enable_thinking = opts.think;
        if (opts.think_max) co.reasoning_effort = "max";
        return engine.chat_prompt(messages, co);
    }

    // Feeds `tokens` (the whole conversation) reusing the cached prefix, then
    // samples until end of generation (engine/generate.h), printing as it
    // goes. Returns the generated text.
    std::string generate(const std::vector<int32_t>& tokens, bool* interrupted) {
        GenerateOptions go;
        go.max_tokens = opts.n_predict;  // < 0: until the context is full
        go.sampler = &sampler;  // one random stream across the turns of a chat
        const bool show_progress = isatty(STDERR_FILENO);
        GenerateCallbacks cb;
        cb.on_text = [&](std::string_view piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return !g_interrupted.exchange(false);
        };
        cb.on_prefill = [&](int64_t done, int64_t total) {
            if (show_progress && total > opts.prefill_chunk)
                std::fprintf(stderr, "\rprefill: %lld/%lld tokens (%d%%)%s", static_cast<long long>(done),
                             static_cast<long long>(total), static_cast<int>(100 * done / total),
                             done == total ? "\n" : "");
        };
        const GenerateResult r = ds4::generate(*session, engine.tokenizer(), tokens, go, cb);
        if (r.reason == StopReason::cancelled) *interrupted = true;
        const int64_t prefilled = r.prompt_tokens - r.cached_tokens;
        const int64_t generated =
            static_cast<int64_t>(r.tokens.size()) - (r.reason == StopReason::end_of_generation ? 1 : 0);
        std::fprintf(stderr, "\nprefill: %.2f t/s, generation: %.2f t/s\n",
                     r.prefill_seconds > 0 ? prefilled / r.prefill_seconds : 0.0,
                     r.decode_seconds > 0 ? generated / r.decode_seconds : 0.0);
        return r.text;
    }
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read prompt file " + path + ".");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

int run_prompt(Engine& engine, const Ds4Options& opts) {
    install_sigint();
    Chat chat(engine, opts);
    const std::string prompt = opts.prompt_file.empty() ? opts.prompt : read_file(opts.prompt_file);
    std::vector<ChatMessage> messages;
    if (!opts.system.empty()) messages.push_back({"system", opts.system, std::nullopt});
    messages.push_back({"user", prompt, std::nullopt});
    bool interrupted = false;
    chat.generate(chat.prompt(messages), &interrupted);
    return interrupted ? 130 : 0;
}

int run_interactive(Engine& engine, const Ds4Options& opts) {
    install_sigint();
    Chat chat(engine, opts);
    std::vector<ChatMessage> messages;
    if (!opts.system.empty()) messages.push_back({"system", opts.system, std::nullopt});
    std::fprintf(stderr, "ds4: interactive chat; Ctrl+C stops a reply, Ctrl+D or /exit quits.\n");
    for (;;) {
        char* line = readline("> ");
        if (!line) break;  // Ctrl+D
        g_interrupted.store(false);  // a Ctrl+C at the prompt only clears the line
        std::string text(line);
        std::free(line);
        if (text == "/exit" || text == "/quit") break;
        if (text.empty()) continue;
        add_history(text.c_str());
        messages.push_back({"user", text, std::nullopt});
        bool interrupted = false;
        try {
            const std::string reply = chat.generate(chat.prompt(messages), &interrupted);
            messages.push_back({"assistant", reply, std::nullopt});
        } catch (const Error& e) {
            std::fprintf(stderr, "ds4: %s\n", e.what());
            messages.pop_back();
        }
        if (interrupted) std::fprintf(stderr, "[stopped]\n");
    }
    std::fprintf(stderr, "\n");
    return 0;
}

}  // namespace ds4

// Fuzz target for the server's request parsers: any bytes parse to a
// request or give an ApiError with a 4xx status and a message, never
// another exception or a crash; what parses keeps the parser's promises (a
// conversation has messages, sampling parameters a Sampler accepts, a limit
// >= -1, an Anthropic request a max_tokens unless it only counts tokens)
// and its error bodies are valid JSON in both APIs' shapes. The first
// byte picks the parser: OpenAI chat or completions, Anthropic messages or
// count_tokens.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "sampling/sampler.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

#define FUZZ_REQUIRE(cond)                                                                \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "fuzz_server_request: broken invariant: %s\n", #cond); \
            std::abort();                                                                 \
        }                                                                                 \
    } while (0)

void check_sampling(const ds4::GenerateOptions& g) {
    FUZZ_REQUIRE(g.max_tokens >= -1);
    ds4::Sampler check(g.sampling);  // throws if the parser let a bad value through
    (void)check;
}

void openai(const std::string& body, bool chat) {
    const ds4::CompletionRequest r = ds4::parse_completion_request(body, chat);
    FUZZ_REQUIRE(r.chat == chat);
    if (chat) FUZZ_REQUIRE(!r.messages.empty());
    check_sampling(r.generate);
}

void anthropic(const std::string& body, bool count_only) {
    const ds4::AnthropicRequest r = ds4::parse_anthropic_request(body, count_only);
    FUZZ_REQUIRE(!r.messages.empty());
    FUZZ_REQUIRE(r.messages.back().role == "user" || r.messages.back().role == "assistant");
    for (const ds4::ChatMessage& m : r.messages) FUZZ_REQUIRE(m.role == "system" || m.role == "user" || m.role == "assistant");
    if (!count_only) FUZZ_REQUIRE(r.generate.max_tokens >= 1);
    FUZZ_REQUIRE(r.generate.stop.size() <= 16);
    check_sampling(r.generate);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const int which = data[0] & 3;
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        if (which < 2) openai(body, which == 0);
        else anthropic(body, which == 3);
    } catch (const ds4::ApiError& e) {
        FUZZ_REQUIRE(e.status() >= 400 && e.status() < 500);
        FUZZ_REQUIRE(std::string(e.what()).size() > 0);
        FUZZ_REQUIRE(nlohmann::json::accept(ds4::openai_error_body(e.status(), e.what(), e.param())));
        const nlohmann::json a = nlohmann::json::parse(ds4::anthropic_error_body(e.status(), e.what()));
        FUZZ_REQUIRE(a["type"] == "error" && a["error"]["type"] == "invalid_request_error");
    }
    return 0;
}

// Fuzz target for the server's request parser: any bytes parse to a request
// or give an ApiError with a 4xx status and a message, never another
// exception or a crash; what parses keeps the parser's promises (a chat has
// messages, sampling parameters a Sampler accepts, a limit >= -1) and its
// error body is valid JSON. The first byte picks chat or completions.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "sampling/sampler.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool chat = (data[0] & 1) == 0;
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        const ds4::CompletionRequest r = ds4::parse_completion_request(body, chat);
        FUZZ_REQUIRE(r.chat == chat);
        if (chat) FUZZ_REQUIRE(!r.messages.empty());
        FUZZ_REQUIRE(r.generate.max_tokens >= -1);
        ds4::Sampler check(r.generate.sampling);  // throws if the parser let a bad value through
        (void)check;
    } catch (const ds4::ApiError& e) {
        FUZZ_REQUIRE(e.status() >= 400 && e.status() < 500);
        FUZZ_REQUIRE(std::string(e.what()).size() > 0);
        const std::string err = ds4::openai_error_body(e.status(), e.what(), e.param());
        FUZZ_REQUIRE(nlohmann::json::accept(err));
    }
    return 0;
}

// The Responses API's output_text log probabilities
// (server/responses_logprobs.h) on replies a random-weight model never
// writes: reasoning then an answer (the reasoning's tokens and the
// whitespace after its close marker carry none), an answer then tool calls
// (the calls' tokens carry none), a token cut across the close marker and
// the answer, a forced call, and an end token. A tiny byte-level
// vocabulary spells the tokens. For every way of cutting the reply into
// streamed pieces (the tokens' log probabilities handed over before the
// piece their text completes, as the server's stream does) the deltas'
// entries concatenate to the whole response's, and output_text.done and
// the final response say the same.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "gguf/gguf_value.h"
#include "server/responses_response.h"
#include "support/test_seed.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {
namespace {

using json = nlohmann::json;

// Piece texts as token ids; special pieces keep their text, the others are
// spelled in GPT-2's byte-level alphabet (space Ġ, newline Ċ).
class Vocab {
public:
    explicit Vocab(const std::vector<std::string>& pieces) {
        std::vector<std::string> tokens;
        std::vector<int64_t> types;
        for (const std::string& p : pieces) {
            const bool special = p.size() > 2 && p.front() == '<' && p.back() == '>';
            std::string t;
            for (char c : p) t += c == ' ' ? "\xc4\xa0" : c == '\n' ? "\xc4\x8a" : std::string(1, c);
            tokens.push_back(special ? p : t);
            types.push_back(p == "<|im_end|>" ? 3 : special ? 4 : 1);
        }
        std::vector<std::pair<std::string, GgufValue>> kv = {
            {"tokenizer.ggml.model", GgufValue::string("gpt2")},
            {"tokenizer.ggml.pre", GgufValue::string("qwen2")},
            {"tokenizer.ggml.tokens", GgufValue::string_array(tokens)},
            {"tokenizer.ggml.token_type", GgufValue::int_array(GgufValueType::I32, types)},
            {"tokenizer.ggml.merges", GgufValue::string_array({})},
        };
        tokenizer = Tokenizer::from_metadata(kv, "test vocabulary");
        pieces_ = pieces;
    }
    int32_t id(const std::string& piece) const {
        for (size_t i = 0; i < pieces_.size(); ++i)
            if (pieces_[i] == piece) return static_cast<int32_t>(i);
        ADD_FAILURE() << "no piece " << piece;
        return 0;
    }
    std::unique_ptr<Tokenizer> tokenizer;

private:
    std::vector<std::string> pieces_;
};

const Vocab& vocab() {
    static const Vocab v({"<think>", "</think>", "<|im_end|>", "<tool_call>", "</tool_call>", "\n", "\n\n", "why",
                          " not", "Be", "cause", ".", "</think>\n\nBe", "Check", "ing", "{\"name\": \"f\", \"arguments\": {}}",
                          "{}}"});
    return v;
}

// A reply of these pieces: its text, ids and log probabilities (token i:
// logprob -(i + 1) / 8, its id the one alternative).
GenerateResult reply(const std::vector<std::string>& pieces, StopReason reason = StopReason::end_of_generation) {
    GenerateResult r;
    for (size_t i = 0; i < pieces.size(); ++i) {
        const int32_t id = vocab().id(pieces[i]);
        r.tokens.push_back(id);
        const float lp = -float(i + 1) / 8;
        r.logprobs.push_back({{id, lp}, {{id, lp}}});
        if (!vocab().tokenizer->is_eog(id)) r.text += pieces[i];
    }
    r.reason = reason;
    r.prompt_tokens = 10;
    return r;
}

ResponsesReplySetup setup(ToolCallSyntax syntax = ToolCallSyntax::none, std::string forced = {}) {
    ResponsesReplySetup s;
    s.id = "resp_1";
    s.model = "m";
    s.echo = json::object();
    s.think = ThinkMarkers{"<think>", "</think>"};
    s.syntax = syntax;
    s.forced = std::move(forced);
    s.tokenizer = vocab().tokenizer.get();
    s.logprobs = true;
    return s;
}

// The tokens (their text) of a list of entries.
std::vector<std::string> texts(const json& entries) {
    std::vector<std::string> out;
    for (const json& e : entries) out.push_back(e["token"]);
    return out;
}

json message_part(const json& response) {
    for (const json& o : response["output"])
        if (o["type"] == "message") return o["content"][0];
    ADD_FAILURE() << "no message in " << response.dump();
    return json();
}

// Streams the reply in pieces of one or more tokens' text, each after its
// tokens' log probabilities, as the server hands them over (the end
// token's come from the result at the end). Returns the deltas' entries concatenated, and checks output_text.done
// and the final response against them.
json streamed(const GenerateResult& r, const ResponsesReplySetup& s, std::mt19937_64& rng) {
    ResponsesReply reply(s);
    std::string sse = reply.begin(0);
    size_t texts = 0;  // the tokens before the end token
    while (texts < r.tokens.size() && !vocab().tokenizer->is_eog(r.tokens[texts])) ++texts;
    size_t given = 0;
    std::string held;
    for (size_t i = 0; i < texts; ++i) {
        held += vocab().tokenizer->token_piece(r.tokens[i]);
        if (rng() % 3 == 0 && i + 1 < texts) continue;  // one piece with the next token's text
        reply.logprobs(std::span<const SampledLogprobs>(r.logprobs).subspan(given, i + 1 - given));
        given = i + 1;
        sse += reply.text(held);
        held.clear();
    }
    sse += reply.end(r);
    json deltas = json::array(), done;
    json final;
    for (size_t at = 0; at < sse.size();) {
        const size_t end = sse.find("\n\n", at);
        const std::string block = sse.substr(at, end - at);
        at = end + 2;
        const json d = json::parse(block.substr(block.find("\ndata: ") + 7));
        if (d["type"] == "response.output_text.delta")
            for (const json& e : d["logprobs"]) deltas.push_back(e);
        if (d["type"] == "response.output_text.done") done = d["logprobs"];
        if (d.contains("response")) final = d["response"];
    }
    EXPECT_EQ(done, deltas);
    EXPECT_EQ(message_part(final)["logprobs"], deltas);
    return deltas;
}

void check(const std::vector<std::string>& pieces, const std::vector<std::string>& want,
           ToolCallSyntax syntax = ToolCallSyntax::none, const std::string& forced = {}) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    const GenerateResult r = reply(pieces);
    const json whole = message_part(ResponsesReply(setup(syntax, forced)).response(r));
    ASSERT_EQ(texts(whole["logprobs"]), want) << whole.dump();
    for (const json& e : whole["logprobs"]) {
        // The entry is the token's: its logprob, bytes and alternative.
        size_t i = 0;
        while (i < pieces.size() && (pieces[i] != e["token"] || r.logprobs[i].sampled.logprob != e["logprob"].get<float>())) ++i;
        ASSERT_LT(i, pieces.size()) << e.dump();
        EXPECT_EQ(e["bytes"].size(), pieces[i].size());
        EXPECT_EQ(e["top_logprobs"].size(), 1u);
    }
    for (int round = 0; round < 50; ++round) ASSERT_EQ(streamed(r, setup(syntax, forced), rng), whole["logprobs"]);
}

TEST(ResponsesLogprobs, OnlyTheAnswersTokens) {
    check({"<think>", "\n", "why", " not", "\n", "</think>", "\n\n", "Be", "cause", ".", "<|im_end|>"},
          {"Be", "cause", "."});
}

TEST(ResponsesLogprobs, ATokenAcrossTheCloseMarkerCountsForTheAnswer) {
    check({"<think>", "why", "</think>\n\nBe", "cause", "."}, {"</think>\n\nBe", "cause", "."});
}

TEST(ResponsesLogprobs, NotTheToolCalls) {
    check({"Check", "ing", ".", "\n", "<tool_call>", "\n", "{\"name\": \"f\", \"arguments\": {}}", "\n", "</tool_call>",
           "<|im_end|>"},
          {"Check", "ing", "."}, ToolCallSyntax::qwen3);
}

TEST(ResponsesLogprobs, AForcedCallHasNone) {
    const std::string forced = forced_tool_call_opening(ToolCallSyntax::qwen3, "f", false, "</think>");
    const GenerateResult r = reply({"{}}", "\n", "</tool_call>", "<|im_end|>"});
    const json whole = ResponsesReply(setup(ToolCallSyntax::qwen3, forced)).response(r);
    ASSERT_EQ(whole["output"].size(), 1u) << whole.dump();
    EXPECT_EQ(whole["output"][0]["type"], "function_call");
}

TEST(ResponsesLogprobs, NotAskedForIsEmpty) {
    ResponsesReplySetup s = setup();
    s.logprobs = false;
    const json whole = ResponsesReply(s).response(reply({"Be", "cause", "."}));
    EXPECT_EQ(message_part(whole)["logprobs"], json::array());
}

}  // namespace
}  // namespace ds4

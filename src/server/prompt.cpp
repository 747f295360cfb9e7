#include "server/prompt.h"

#include "common/error.h"
#include "engine/chat_prompt.h"
#include "engine/engine.h"
#include "server/api_error.h"

namespace ds4 {

ServerPrompt chat_server_prompt(const Engine& engine, const std::vector<ChatMessage>& messages,
                                const ChatOptions& options, const std::string& prefill) {
    ServerPrompt p;
    try {
        // The same render and tokenization as Engine::chat_prompt, with the
        // text kept: the prefill goes after it, and its end says whether
        // the reply opens inside a reasoning block.
        const std::string text = render_chat(engine.chat_template(), messages, options) + prefill;
        p.tokens = prompt_token_ids(engine.tokenizer(), text);
        p.think = think_markers(engine.chat_template());
        p.opens_thinking = p.think && prompt_opens_thinking(text, *p.think);
    } catch (const ApiError&) {
        throw;
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "messages");
    }
    return p;
}

ServerPrompt text_server_prompt(const Engine& engine, const std::string& text) {
    ServerPrompt p;
    try {
        p.tokens = prompt_token_ids(engine.tokenizer(), text);
    } catch (const Error& e) {
        throw ApiError(400, e.what(), "prompt");
    }
    return p;
}

}  // namespace ds4

#include "server/prompt.h"

#include "common/error.h"
#include "engine/chat_prompt.h"
#include "engine/engine.h"
#include "server/api_error.h"

namespace ds4 {

ServerPrompt chat_server_prompt(const Engine& engine, const std::vector<ChatMessage>& messages,
                                const ChatOptions& options, const std::string& prefill, const RequestTools* tools) {
    ServerPrompt p;
    try {
        // The same render and tokenization as Engine::chat_prompt, with the
        // text kept: the prefill goes after it, and its end says whether
        // the reply opens inside a reasoning block.
        const std::string text = render_chat(engine.chat_template(), messages, options) + prefill;
        p.think = think_markers(engine.chat_template());
        p.opens_thinking = p.think && prompt_opens_thinking(text, *p.think);
        if (tools && tools->active()) {
            p.tool_syntax = tool_call_syntax(engine.chat_template());
            p.tool_types = ToolParamTypes(tools->specs);
            const ToolChoice::Mode mode = tools->choice.mode;
            if (mode == ToolChoice::Mode::required || mode == ToolChoice::Mode::function) {
                if (p.tool_syntax == ToolCallSyntax::none)
                    throw ApiError(400, "'tool_choice' demands a tool call, but the model's chat template (" +
                                            engine.chat_template() + ") has no tool-call syntax ds4 knows.", "tool_choice");
                p.forced = forced_tool_call_opening(p.tool_syntax, tools->choice.name, p.opens_thinking,
                                                    p.think ? p.think->close : std::string_view(),
                                                    p.think && prompt_closes_thinking(text, *p.think));
            }
        }
        p.tokens = prompt_token_ids(engine.tokenizer(), text + p.forced);
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

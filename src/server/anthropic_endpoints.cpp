// Anthropic's shapes: POST /v1/messages (whole or streamed) and POST
// /v1/messages/count_tokens, errors as {"type": "error", ...}.
#include "engine/engine.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/prompt.h"
#include "server/server_context.h"

namespace ds4 {

namespace {

using json = nlohmann::json;

void send_error(ServerContext& ctx, uint64_t id, const httplib::Request& req, httplib::Response& res, int status,
                const std::string& message, const Generation* g = nullptr) {
    res.status = status;
    res.set_content(anthropic_error_body(status, message), "application/json");
    ctx.log_request(id, req, status, g);
}

ServerPrompt render(ServerContext& ctx, const Engine& engine, AnthropicRequest& ar) {
    ctx.tool_memory.restore(ar.messages);
    return chat_server_prompt(engine, ar.messages, ar.chat_options, ar.prefill, &ar.tools);
}

void messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const uint64_t id = ctx.next_request++;
    AnthropicRequest ar;
    ServerPrompt p;
    std::shared_ptr<Generation> g;
    uint64_t sid = 0;
    int64_t prompt_tokens = 0;
    try {
        const Engine& engine = ctx.ready();
        ar = parse_anthropic_request(req.body, false);
        p = render(ctx, engine, ar);
        prompt_tokens = static_cast<int64_t>(p.tokens.size());
        g = ctx.submit(std::move(p.tokens), ar.generate, "messages", res, sid);
    } catch (const ApiError& e) {
        return send_error(ctx, id, req, res, e.status(), e.what());
    }
    const std::string model = ar.model.empty() ? ctx.opts.model_id : ar.model;
    auto reply = std::make_shared<AnthropicReply>("msg_ds4_" + std::to_string(id), model, prompt_tokens, p.think,
                                                  p.opens_thinking, p.tool_syntax, &ctx.tool_memory, p.forced,
                                                  p.tool_types);
    if (ar.stream) return ctx.stream(res, g, sid, reply, id, req);
    const GenerateResult* done = ctx.wait(*g, sid, id, req, res);
    if (!done) return;  // the client left
    const GenerateResult& r = *done;
    if (r.reason == StopReason::failed)
        return send_error(ctx, id, req, res, r.unavailable ? 503 : 500, r.error, g.get());
    res.set_content(dump_json(reply->message(r)), "application/json");
    ctx.log_request(id, req, 200, g.get());
}

// The prompt's tokens exactly as /v1/messages would feed them.
void count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const uint64_t id = ctx.next_request++;
    try {
        const Engine& engine = ctx.ready();
        AnthropicRequest ar = parse_anthropic_request(req.body, true);
        const ServerPrompt p = render(ctx, engine, ar);
        res.set_content(dump_json(json{{"input_tokens", p.tokens.size()}}), "application/json");
        ctx.log_request(id, req, 200, nullptr);
    } catch (const ApiError& e) {
        send_error(ctx, id, req, res, e.status(), e.what());
    }
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, ServerContext& ctx) {
    http.Post("/v1/messages", [&ctx](const httplib::Request& req, httplib::Response& res) { messages(ctx, req, res); });
    http.Post("/v1/messages/count_tokens",
              [&ctx](const httplib::Request& req, httplib::Response& res) { count_tokens(ctx, req, res); });
}

}  // namespace ds4

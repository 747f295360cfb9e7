// OpenAI's shapes: GET /v1/models, POST /v1/chat/completions and
// /v1/completions, whole or streamed (chunks, the finish reason, usage when
// asked for, then [DONE]), with log probabilities when asked for. The
// Responses API is server/responses_endpoint.cpp.
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/tool_call_memory.h"
#include "server/prompt.h"
#include "server/server_context.h"

namespace ds4 {

namespace {

using json = nlohmann::json;

void complete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, bool chat) {
    const uint64_t id = ctx.next_request++;
    CompletionRequest cr;
    ServerPrompt p;
    std::optional<OpenAIReply::ToolReading> tools;
    std::shared_ptr<Generation> g;
    uint64_t sid = 0;
    const Engine* engine_ptr = nullptr;
    try {
        const Engine& engine = ctx.ready();
        engine_ptr = &engine;
        cr = parse_completion_request(req.body, chat);
        ctx.tool_memory.restore(cr.messages);
        p = chat ? chat_server_prompt(engine, cr.messages, cr.chat_options, {}, &cr.tools) : text_server_prompt(engine, cr.prompt);
        if (cr.tools.active())
            tools = OpenAIReply::ToolReading{p.think,           p.opens_thinking, p.tool_syntax,
                                             &ctx.tool_memory,  p.forced,         p.tool_types};
        g = ctx.submit(std::move(p.tokens), cr.generate, chat ? "messages" : "prompt", res, sid);
    } catch (const ApiError& e) {
        res.status = e.status();
        res.set_content(openai_error_body(e.status(), e.what(), e.param()), "application/json");
        ctx.log_request(id, req, e.status(), nullptr);
        return;
    }
    const std::string rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id);
    const std::string model = cr.model.empty() ? ctx.opts.model_id : cr.model;
    auto reply = std::make_shared<OpenAIReply>(chat, rid, model, cr.include_usage, tools);
    if (cr.generate.top_logprobs >= 0) reply->report_logprobs(engine_ptr->tokenizer());
    if (cr.stream) {
        ctx.stream(res, g, sid, reply, id, req);
        return;
    }
    const GenerateResult* done = ctx.wait(*g, sid, id, req, res);
    if (!done) return;  // the client left
    const GenerateResult& r = *done;
    if (r.reason == StopReason::failed) {
        const int status = r.unavailable ? 503 : 500;  // 503: a pipeline stage is gone; retry later
        res.status = status;
        res.set_content(openai_error_body(status, r.error), "application/json");
        ctx.log_request(id, req, status, g.get());
        return;
    }
    res.set_content(dump_json(reply->body(r)), "application/json");
    ctx.log_request(id, req, 200, g.get());
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerContext& ctx) {
    http.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
        const json m = {{"id", ctx.opts.model_id}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "ds4"}};
        res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
        complete(ctx, req, res, true);
    });
    http.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
        complete(ctx, req, res, false);
    });
}

}  // namespace ds4

// The Responses API route: POST /v1/responses, whole or streamed, errors
// in OpenAI's shape. The conversation renders through the same prompt code
// as /v1/chat/completions (server/prompt.h), so the same conversation
// gives the same prompt tokens and, greedy, the same reply.
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/prompt.h"
#include "server/responses_request.h"
#include "server/responses_response.h"
#include "server/server_context.h"
#include "server/tool_call_memory.h"

namespace ds4 {

namespace {

void send_responses_error(ServerContext& ctx, uint64_t id, const httplib::Request& req, httplib::Response& res,
                          int status, const std::string& message, const std::string& param = {},
                          const Generation* g = nullptr) {
    res.status = status;
    res.set_content(openai_error_body(status, message, param), "application/json");
    ctx.log_request(id, req, status, g);
}

void responses(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const uint64_t id = ctx.next_request++;
    ResponsesRequest rr;
    ServerPrompt p;
    std::shared_ptr<Generation> g;
    uint64_t sid = 0;
    const Engine* engine = nullptr;
    try {
        engine = &ctx.ready();
        rr = parse_responses_request(req.body);
        ctx.tool_memory.restore(rr.messages);
        try {
            p = chat_server_prompt(*engine, rr.messages, rr.chat_options, {}, &rr.tools);
        } catch (const ApiError& e) {
            // The renderer names chat's field; here the conversation is `input`.
            throw ApiError(e.status(), e.what(), e.param() == "messages" ? "input" : e.param());
        }
        g = ctx.submit(std::move(p.tokens), rr.generate, "input", res, sid);
    } catch (const ApiError& e) {
        return send_responses_error(ctx, id, req, res, e.status(), e.what(), e.param());
    }
    ResponsesReplySetup setup;
    setup.id = new_tool_call_id("resp_");
    setup.model = rr.model.empty() ? ctx.opts.model_id : rr.model;
    setup.echo = std::move(rr.echo);
    setup.think = p.think;
    setup.opens_thinking = p.opens_thinking;
    setup.syntax = p.tool_syntax;
    setup.memory = &ctx.tool_memory;
    setup.forced = p.forced;
    setup.types = p.tool_types;
    setup.tokenizer = &engine->tokenizer();
    setup.logprobs = rr.generate.top_logprobs >= 0;
    auto reply = std::make_shared<ResponsesReply>(std::move(setup));
    if (rr.stream) return ctx.stream(res, g, sid, reply, id, req);
    const GenerateResult* done = ctx.wait(*g, sid, id, req, res);
    if (!done) return;  // the client left
    const GenerateResult& r = *done;
    if (r.reason == StopReason::failed)  // 503: a pipeline stage is gone; retry later
        return send_responses_error(ctx, id, req, res, r.unavailable ? 503 : 500, r.error, {}, g.get());
    res.set_content(dump_json(reply->response(r)), "application/json");
    ctx.log_request(id, req, 200, g.get());
}

}  // namespace

void add_responses_routes(httplib::Server& http, ServerContext& ctx) {
    http.Post("/v1/responses", [&ctx](const httplib::Request& req, httplib::Response& res) { responses(ctx, req, res); });
}

}  // namespace ds4

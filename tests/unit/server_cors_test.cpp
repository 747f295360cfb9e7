// CorsPolicy (--cors): which origin a response allows, Vary, and the
// preflight's answer, on httplib's own request and response objects.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/cors.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

httplib::Request request(const std::string& method, const std::string& origin) {
    httplib::Request r;
    r.method = method;
    r.path = "/v1/chat/completions";
    if (!origin.empty()) r.headers.emplace("Origin", origin);
    return r;
}

TEST(ServerCors, OffAddsNothingAndAnswersNoPreflight) {
    const CorsPolicy cors({});
    httplib::Request req = request("OPTIONS", "https://a.example");
    req.headers.emplace("Access-Control-Request-Method", "POST");
    httplib::Response res;
    cors.apply(req, res);
    EXPECT_FALSE(cors.answer_preflight(req, res));
    EXPECT_TRUE(res.headers.empty());
}

TEST(ServerCors, ListedOriginIsEchoedWithVary) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    const std::string listed = "http://localhost:" + std::to_string(1 + std::mt19937_64(seed)() % 65535);
    const CorsPolicy cors({"https://app.example", listed});
    for (const std::string& origin : {listed, std::string("https://APP.example")}) {
        httplib::Response res;
        cors.apply(request("POST", origin), res);
        EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), origin);  // byte for byte
        EXPECT_EQ(res.get_header_value("Vary"), "Origin");
    }
    for (const std::string origin : {"https://evil.example", "https://app.example.evil", "null", ""}) {
        httplib::Response res;
        cors.apply(request("POST", origin), res);
        EXPECT_FALSE(res.has_header("Access-Control-Allow-Origin")) << origin;
        EXPECT_EQ(res.get_header_value("Vary"), "Origin") << origin;  // a cache must not reuse it for a listed one
    }
}

TEST(ServerCors, StarAllowsAnyOriginWithoutVary) {
    const CorsPolicy cors({"*"});
    httplib::Response res;
    cors.apply(request("GET", "https://anything.example"), res);
    EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "*");
    EXPECT_FALSE(res.has_header("Vary"));
}

TEST(ServerCors, PreflightNamesMethodsAndHeadersTheSdksSend) {
    const CorsPolicy cors({"https://app.example"});
    httplib::Request req = request("OPTIONS", "https://app.example");
    req.headers.emplace("Access-Control-Request-Method", "POST");
    req.headers.emplace("Access-Control-Request-Headers", "authorization, content-type, x-stainless-os, bad header, x-api-key");
    httplib::Response res;
    cors.apply(req, res);
    ASSERT_TRUE(cors.answer_preflight(req, res));
    EXPECT_EQ(res.status, 204);
    EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "https://app.example");
    EXPECT_NE(res.get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
    const std::string h = res.get_header_value("Access-Control-Allow-Headers");
    for (const char* name : {"Authorization", "Content-Type", "x-api-key", "anthropic-version", "OpenAI-Beta", "x-stainless-os"})
        EXPECT_NE(h.find(name), std::string::npos) << name << " in " << h;
    EXPECT_EQ(h.find("bad header"), std::string::npos) << h;  // not a header name: not reflected
    EXPECT_EQ(h.find("authorization"), std::string::npos) << h;  // named once, not twice
}

TEST(ServerCors, PreflightFromAnotherOriginIsRefused) {
    const CorsPolicy cors({"https://app.example"});
    httplib::Request req = request("OPTIONS", "https://evil.example");
    req.headers.emplace("Access-Control-Request-Method", "POST");
    httplib::Response res;
    ASSERT_TRUE(cors.answer_preflight(req, res));
    EXPECT_EQ(res.status, 403);
    EXPECT_NE(res.body.find("--cors"), std::string::npos) << res.body;
    // An OPTIONS that is no preflight goes on to the routes as before.
    httplib::Response plain;
    EXPECT_FALSE(cors.answer_preflight(request("OPTIONS", "https://app.example"), plain));
}

}  // namespace
}  // namespace ds4

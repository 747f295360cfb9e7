#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "server/api_error.h"

namespace ds4 {

namespace {

std::string lowercase_ascii(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// What the OpenAI and Anthropic SDKs send from a browser. Authorization
// must be named: "*" in Allow-Headers does not cover it.
constexpr const char* kAllowHeaders[] = {"Authorization", "Content-Type", "x-api-key", "anthropic-version",
                                         "anthropic-beta", "anthropic-dangerous-direct-browser-access",
                                         "OpenAI-Beta", "OpenAI-Organization", "OpenAI-Project"};

// The headers to allow for a preflight: the list above, plus the ones the
// browser asks for (SDKs add their own, x-stainless-* and the like; any
// header the API ignores is harmless). A name that is not an HTTP token is
// left out rather than reflected.
std::string allow_headers(const std::string& requested) {
    std::vector<std::string> names(std::begin(kAllowHeaders), std::end(kAllowHeaders));
    size_t i = 0;
    while (i < requested.size()) {
        size_t j = requested.find(',', i);
        if (j == std::string::npos) j = requested.size();
        std::string name = requested.substr(i, j - i);
        i = j + 1;
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
            return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
        });
        if (!token) continue;
        if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return lowercase_ascii(n) == lowercase_ascii(name); }))
            names.push_back(name);
    }
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

}  // namespace

std::string CorsPolicy::allowed_origin(const std::string& origin) const {
    if (origins_.size() == 1 && origins_[0] == "*") return "*";
    if (origin.empty()) return "";
    const std::string o = lowercase_ascii(origin);
    // The browser compares the answer with its origin byte for byte: echo it.
    for (const std::string& a : origins_)
        if (a == o) return origin;
    return "";
}

void CorsPolicy::apply(const httplib::Request& req, httplib::Response& res) const {
    if (!enabled()) return;
    const std::string allow = allowed_origin(req.get_header_value("Origin"));
    if (!allow.empty()) res.set_header("Access-Control-Allow-Origin", allow);
    // The answer depends on Origin unless every origin is allowed.
    if (allow != "*") res.set_header("Vary", "Origin");
}

bool CorsPolicy::answer_preflight(const httplib::Request& req, httplib::Response& res) const {
    if (!enabled() || req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
    if (allowed_origin(req.get_header_value("Origin")).empty()) {
        res.status = 403;
        res.set_content(error_body_for_path(req.path, 403,
                                            "the origin " + req.get_header_value("Origin") +
                                                " is not allowed (see --cors)."),
                        "application/json");
        return true;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", allow_headers(req.get_header_value("Access-Control-Request-Headers")));
    res.set_header("Access-Control-Max-Age", "600");  // seconds a browser may reuse this answer
    return true;
}

}  // namespace ds4

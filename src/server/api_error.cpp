#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace ds4 {

std::string openai_error_body(int status, const std::string& message, const std::string& param) {
    const char* type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    nlohmann::json e = {{"message", message}, {"type", type}, {"code", status}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    return nlohmann::json{{"error", e}}.dump();
}

std::string anthropic_error_body(int status, const std::string& message) {
    const char* type = status == 401 ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 || status == 529 ? "overloaded_error"
                       : status >= 500 ? "api_error"
                                       : "invalid_request_error";
    return nlohmann::json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool is_anthropic_path(const std::string& path) { return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0; }

std::string error_body_for_path(const std::string& path, int status, const std::string& message, const std::string& param) {
    return is_anthropic_path(path) ? anthropic_error_body(status, message) : openai_error_body(status, message, param);
}

}  // namespace ds4

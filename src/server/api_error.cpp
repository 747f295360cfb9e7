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

}  // namespace ds4

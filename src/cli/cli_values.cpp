#include "cli/cli_values.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "chat/chat.h"

#include "common/error.h"

namespace ds4 {

namespace {

std::string name(std::string_view flag) { return std::string(flag); }

[[noreturn]] void fail(std::string_view flag, const std::string& what, std::string_view text) {
    throw UsageError(name(flag) + " " + what + ", got " + quote_value(text));
}

// For values that parsed as numbers: shown as typed, without quotes.
[[noreturn]] void fail_range(std::string_view flag, const std::string& what, std::string_view text) {
    throw UsageError(name(flag) + " " + what + ", got " + std::string(text));
}

}  // namespace

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

std::string quote_value(std::string_view text) {
    constexpr size_t kMax = 40;
    std::string out = "'";
    for (size_t i = 0; i < text.size() && i < kMax; ++i) {
        char c = text[i];
        // Keep the message on one line whatever the user typed.
        out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    if (text.size() > kMax) out += "...";
    out += "'";
    return out;
}

int64_t parse_int_value(std::string_view flag, std::string_view text, int64_t min, int64_t max) {
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec == std::errc::invalid_argument || end != digits.data() + digits.size())
        fail(flag, "must be an integer", text);
    if (ec == std::errc::result_out_of_range || v < min || v > max) {
        std::string range;
        if (max == std::numeric_limits<int64_t>::max())
            range = "must be >= " + std::to_string(min);
        else
            range = "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
        fail_range(flag, range, text);
    }
    return v;
}

uint64_t parse_u64_value(std::string_view flag, std::string_view text) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
        fail(flag, "must be a non-negative integer", text);
    if (ec == std::errc::result_out_of_range) fail_range(flag, "must be at most 18446744073709551615", text);
    return v;
}

double parse_float_value(std::string_view flag, std::string_view text) {
    std::string_view body = text;
    if (!body.empty() && body.front() == '+') body.remove_prefix(1);
    double v = 0;
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
    // from_chars accepts "inf" and "nan"; neither is a usable setting.
    if (body.empty() || ec != std::errc() || end != body.data() + body.size() || !std::isfinite(v))
        fail(flag, "must be a number", text);
    return v;
}

int parse_port_value(std::string_view flag, std::string_view text) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
        fail(flag, "port must be an integer", text);
    if (ec == std::errc::result_out_of_range || v < 1 || v > 65535) fail_range(flag, "port must be in [1, 65535]", text);
    return static_cast<int>(v);
}

ExpertCacheBudget parse_expert_cache_budget(std::string_view flag, std::string_view text) {
    // Split the number from a unit suffix.
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    std::string_view number = text.substr(0, i);
    std::string unit;
    for (char c : text.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string what = "must be a number of experts (N) or a size in GiB (NGB)";
    if (number.empty()) fail(flag, what, text);

    ExpertCacheBudget budget;
    if (unit.empty()) {
        uint64_t n = 0;
        auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
        if (ec != std::errc() || end != number.data() + number.size()) fail(flag, what, text);
        if (n == 0) fail(flag, "must be at least 1 expert", text);
        budget.experts = n;
        return budget;
    }
    if (unit != "gb" && unit != "g" && unit != "gib") fail(flag, what, text);
    double gib = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), gib);
    if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(gib)) fail(flag, what, text);
    // 16 EiB would overflow the byte count; nobody has that much memory.
    if (gib <= 0 || gib > 1e9) fail(flag, "must be a size in (0, 1e9] GiB", text);
    budget.bytes = static_cast<uint64_t>(gib * 1073741824.0);
    if (budget.bytes == 0) fail(flag, "must be a size in (0, 1e9] GiB", text);
    return budget;
}

uint64_t parse_gib_size(std::string_view flag, std::string_view text) {
    if (text == "0") return 0;
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string_view number = text.substr(0, i);
    std::string unit;
    for (char c : text.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string what = "must be a size in GiB (NGB, e.g. 12GB)";
    if (number.empty() || (unit != "gb" && unit != "g" && unit != "gib")) fail(flag, what, text);
    double gib = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), gib);
    if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(gib)) fail(flag, what, text);
    if (gib > 1e9) fail(flag, "must be a size in [0, 1e9] GiB", text);
    return static_cast<uint64_t>(gib * 1073741824.0);
}

std::string parse_backend_value(std::string_view flag, std::string_view text) {
    if (text != "auto" && text != "cpu" && text != "cuda")
        throw UsageError(std::string(flag) + " must be auto, cpu or cuda, got " + quote_value(text));
    return std::string(text);
}

std::string parse_chat_template_value(std::string_view flag, std::string_view text) {
    const auto& names = chat_template_names();
    if (text != kRawChat && std::find(names.begin(), names.end(), text) == names.end())
        throw UsageError(std::string(flag) + " must be one of " + chat_template_list() + ", " + std::string(kRawChat) +
                         "; got " + quote_value(text));
    return std::string(text);
}

}  // namespace ds4

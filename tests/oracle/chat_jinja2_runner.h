// Runs tests/oracle/chat_render_jinja2.py (the real templates under jinja2,
// configured like Hugging Face transformers) once over every template and
// case: results[template][case] is the rendered string or {"error": ...}.
// Shared by the Qwen3 rendering and tool-call round-trip tests.
#pragma once

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds4_test {

// `Json` is nlohmann::json or nlohmann::ordered_json: the request is sent in
// its key order (GLM's templates print arguments in dict order).
template <class Json>
inline nlohmann::json render_with_jinja2(const std::vector<std::string>& templates, const Json& cases) {
    namespace fs = std::filesystem;
    const fs::path helper = fs::path(DS4_SOURCE_DIR) / "tests/oracle/chat_render_jinja2.py";
    const fs::path out_path = fs::temp_directory_path() /
                              ("ds4_chat_oracle_" + std::to_string(std::random_device{}()) + ".json");
    const std::string command = "python3 '" + helper.string() + "' '" + out_path.string() + "'";
    // If the helper dies before reading everything, report its exit status
    // instead of being killed by SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    FILE* pipe = popen(command.c_str(), "w");
    if (!pipe) throw std::runtime_error("cannot start " + command);
    const std::string request = Json{{"templates", templates}, {"cases", cases}}.dump();
    fwrite(request.data(), 1, request.size(), pipe);
    int status = pclose(pipe);
    if (status != 0) {
        throw std::runtime_error("the jinja2 oracle failed (exit status " + std::to_string(status) +
                                 "); it needs python3 with jinja2 (pip install jinja2==3.1.6): " + command);
    }
    std::ifstream in(out_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json response = nlohmann::json::parse(ss.str());
    fs::remove(out_path);
    return response;
}

}  // namespace ds4_test

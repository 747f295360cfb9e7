#include "experts/routing_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"

namespace ds4 {

namespace {

constexpr const char* kMagic = "ds4-routing-profile 2";

// One unsigned decimal field; no sign, no overflow.
bool parse_u64(std::istringstream& in, uint64_t& v) {
    std::string t;
    if (!(in >> t) || t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    v = std::stoull(t);
    return true;
}

// "layer expert count", nothing else.
bool parse_fields(const std::string& line, uint64_t& layer, uint64_t& expert, uint64_t& count) {
    std::istringstream l(line);
    std::string extra;
    return parse_u64(l, layer) && parse_u64(l, expert) && parse_u64(l, count) && !(l >> extra);
}

// "<word> n", nothing else.
bool parse_line(const std::string& line, const char* word, uint64_t& n) {
    std::istringstream l(line);
    std::string w, extra;
    return (l >> w) && w == word && parse_u64(l, n) && !(l >> extra);
}

}  // namespace

ExpertCounts read_routing_profile(const std::string& path, const std::string& identity, std::string& warning) {
    warning.clear();
    std::ifstream in(path);
    if (!in) return {};
    std::string magic, model;
    if (!std::getline(in, magic) || magic != kMagic || !std::getline(in, model)) {
        warning = "the routing profile " + path + " is not one this ds4 wrote; ignoring it.";
        return {};
    }
    if (model != "model " + identity) {
        warning = "the routing profile " + path + " was recorded with another model file; ignoring it.";
        return {};
    }
    ExpertCounts counts;
    std::string line;
    while (std::getline(in, line)) {
        uint64_t layer = 0, expert = 0, count = 0;
        if (parse_line(line, "end", count)) {
            // The trailer: a file cut short (a full disk, a copy stopped
            // half way) lacks it, names more lines than it holds, or lost
            // its last newline (getline then stopped at the end of the file).
            if (count != counts.size() || in.eof() || std::getline(in, line)) break;
            return counts;
        }
        if (!parse_fields(line, layer, expert, count) || layer > 1u << 20 || expert > 1u << 30) {
            warning = "the routing profile " + path + " has a malformed line ('" + line.substr(0, 60) + "'); ignoring it.";
            return {};
        }
        counts.push_back({{int(layer), int64_t(expert)}, count});
    }
    warning = "the routing profile " + path + " is cut short; ignoring it.";
    return {};
}

void write_routing_profile(const std::string& path, const std::string& identity, const ExpertCounts& counts) {
    std::string ignored;
    std::map<std::pair<int, int64_t>, uint64_t> merged;
    // Saturating: a count that hit the top stays the hottest.
    auto add = [&](const auto& k, uint64_t c) { merged[k] = merged[k] > UINT64_MAX - c ? UINT64_MAX : merged[k] + c; };
    for (const auto& [k, c] : read_routing_profile(path, identity, ignored)) add(k, c);
    for (const auto& [k, c] : counts) add(k, c);
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << kMagic << "\nmodel " << identity << "\n";
        for (const auto& [k, c] : merged) out << k.first << ' ' << k.second << ' ' << c << '\n';
        out << "end " << merged.size() << '\n';
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error("cannot write the routing profile " + path + ": " + std::strerror(errno) + ".");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw Error("cannot write the routing profile " + path + ": " + std::strerror(e) + ".");
    }
}

std::vector<std::pair<int, int64_t>> hottest_first(const ExpertCounts& counts) {
    ExpertCounts sorted = counts;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::pair<int, int64_t>> out;
    out.reserve(sorted.size());
    for (const auto& [k, c] : sorted) out.push_back(k);
    return out;
}

}  // namespace ds4

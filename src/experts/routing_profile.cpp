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

constexpr const char* kMagic = "ds4-routing-profile 1";

}  // namespace

ExpertCounts read_routing_profile(const std::string& path, const std::string& identity, std::string& warning) {
    warning.clear();
    std::ifstream in(path);
    if (!in) return {};
    std::string magic, model;
    if (!std::getline(in, magic) || magic != kMagic || !std::getline(in, model)) {
        warning = "the routing profile " + path + " is not one ds4 wrote; ignoring it.";
        return {};
    }
    if (model != "model " + identity) {
        warning = "the routing profile " + path + " was recorded with another model file; ignoring it.";
        return {};
    }
    ExpertCounts counts;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream l(line);
        long long layer = -1, expert = -1;
        unsigned long long count = 0;
        std::string extra;
        if (!(l >> layer >> expert >> count) || (l >> extra) || layer < 0 || layer > 1 << 20 || expert < 0) {
            warning = "the routing profile " + path + " has a malformed line ('" + line.substr(0, 60) + "'); ignoring it.";
            return {};
        }
        counts.push_back({{int(layer), int64_t(expert)}, uint64_t(count)});
    }
    return counts;
}

void write_routing_profile(const std::string& path, const std::string& identity, const ExpertCounts& counts) {
    std::string ignored;
    std::map<std::pair<int, int64_t>, uint64_t> merged;
    for (const auto& [k, c] : read_routing_profile(path, identity, ignored)) merged[k] += c;
    for (const auto& [k, c] : counts) merged[k] += c;
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << kMagic << "\nmodel " << identity << "\n";
        for (const auto& [k, c] : merged) out << k.first << ' ' << k.second << ' ' << c << '\n';
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

#include "experts/routing_trace.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "common/error.h"

namespace ds4 {

namespace {

// Cuts `text` into '\n'-ended lines, one at a time.
class Lines {
public:
    explicit Lines(std::string_view text) : text_(text) {}
    // The next line without its '\n'; false at the end, or for a last line
    // with no '\n' (a file cut short mid-line), which `cut` then says.
    bool next(std::string_view& line) {
        if (at_ >= text_.size()) return false;
        const size_t nl = text_.find('\n', at_);
        if (nl == std::string_view::npos) {
            cut_ = true;
            return false;
        }
        line = text_.substr(at_, nl - at_);
        at_ = nl + 1;
        ++number_;
        return true;
    }
    bool cut() const { return cut_; }
    size_t number() const { return number_; }

private:
    std::string_view text_;
    size_t at_ = 0, number_ = 0;
    bool cut_ = false;
};

// A field of a line split on single spaces.
class Fields {
public:
    explicit Fields(std::string_view line) : line_(line) {}
    bool next(std::string_view& f) {
        if (done_) return false;
        const size_t sp = line_.find(' ', at_);
        f = line_.substr(at_, sp == std::string_view::npos ? std::string_view::npos : sp - at_);
        if (sp == std::string_view::npos) done_ = true;
        else at_ = sp + 1;
        return true;
    }
    bool done() const { return done_; }

private:
    std::string_view line_;
    size_t at_ = 0;
    bool done_ = false;
};

// Plain decimal in [lo, hi]: digits only, no leading zero, no sign.
bool number(std::string_view f, int64_t lo, int64_t hi, int64_t& v) {
    if (f.empty() || f.size() > 18 || (f.size() > 1 && f[0] == '0')) return false;
    for (char c : f)
        if (c < '0' || c > '9') return false;
    std::from_chars(f.data(), f.data() + f.size(), v);
    return v >= lo && v <= hi;
}

// A field as a message shows it: short, printable.
std::string shown(std::string_view f) {
    std::string s(f.substr(0, 20));
    for (char& c : s)
        if (c < 0x20 || c > 0x7e) c = '?';
    return s;
}

bool printable(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < 0x20 || c > 0x7e) return false;
    return true;
}

[[noreturn]] void damaged(const std::string& name, size_t line, const std::string& why) {
    throw Error("the routing trace " + name + " is damaged at line " + std::to_string(line) + ": " + why + ".");
}

}  // namespace

std::vector<int32_t> RoutingTrace::route_ids(size_t r) const {
    const TraceRoute& t = routes[r];
    const auto* b = ids.data() + t.first;
    return std::vector<int32_t>(b, b + t.rows * experts_per_token);
}

uint64_t RoutingTrace::tokens() const {
    if (blocks.empty()) return 0;
    uint64_t rows = 0;
    for (const TraceRoute& t : routes) rows += uint64_t(t.rows);
    return rows / blocks.size();
}

int64_t RoutingTrace::total_experts() const {
    int64_t n = 0;
    for (const PolicyBlock& b : blocks) n += b.n_expert;
    return n;
}

RoutingTrace parse_routing_trace(std::string_view text, const std::string& name) {
    Lines lines(text);
    std::string_view line, f;
    RoutingTrace t;
    const auto need = [&](const char* what) {
        if (lines.next(line)) return;
        if (lines.number() == 0 && !lines.cut() && text.empty()) throw Error("the routing trace " + name + " is empty.");
        throw Error("the routing trace " + name + " is cut short (it ends before " + what + ").");
    };
    if (!text.empty() && text.substr(0, 18) != std::string_view(kRoutingTraceMagic).substr(0, 18))
        throw Error("the routing trace " + name + " is not a routing trace (no 'ds4-routing-trace 1' line).");
    need("its first line");
    if (line != kRoutingTraceMagic) {
        if (lines.number() == 1 && line.substr(0, 18) == "ds4-routing-trace ")
            damaged(name, 1, "version '" + shown(line.substr(18)) + "' is not one this ds4 reads (1)");
        throw Error("the routing trace " + name + " is not a routing trace (no 'ds4-routing-trace 1' line).");
    }
    need("its source line");
    if (line.substr(0, 7) != "source " || !printable(line.substr(7)))
        damaged(name, lines.number(), "expected 'source TEXT' (printable text)");
    t.source = std::string(line.substr(7));
    need("its experts-per-token line");
    {
        Fields fs(line);
        if (!fs.next(f) || f != "experts-per-token" || !fs.next(f) || !fs.done() ||
            !number(f, 1, kTraceMaxExpertsPerToken, t.experts_per_token))
            damaged(name, lines.number(),
                    "expected 'experts-per-token K', K from 1 to " + std::to_string(kTraceMaxExpertsPerToken));
    }
    std::unordered_map<int, int64_t> n_expert;  // by layer
    for (;;) {
        need("its 'end' line");
        Fields fs(line);
        if (!fs.next(f)) damaged(name, lines.number(), "an empty line");
        const size_t at = lines.number();
        if (f == "block") {
            int64_t layer = 0, n = 0;
            if (!t.routes.empty()) damaged(name, at, "a block line after the first route line");
            if (!fs.next(f) || !number(f, 0, kTraceMaxLayer, layer) || !fs.next(f) || !number(f, 1, kTraceMaxExperts, n) ||
                !fs.done())
                damaged(name, at, "expected 'block LAYER N_EXPERT'");
            if (!t.blocks.empty() && layer <= t.blocks.back().layer) damaged(name, at, "block layers must ascend");
            if (int64_t(t.blocks.size()) >= kTraceMaxBlocks) damaged(name, at, "more blocks than a model has");
            t.blocks.push_back(PolicyBlock{int(layer), n});
            n_expert[int(layer)] = n;
        } else if (f == "route") {
            int64_t layer = 0, rows = 0;
            if (!fs.next(f) || !number(f, 0, kTraceMaxLayer, layer) || !fs.next(f) || !number(f, 1, kTraceMaxRows, rows))
                damaged(name, at, "expected 'route LAYER ROWS ID...'");
            const auto it = n_expert.find(int(layer));
            if (it == n_expert.end()) damaged(name, at, "block " + std::to_string(layer) + " has no block line");
            const uint64_t first = t.ids.size();
            const int64_t want = rows * t.experts_per_token;
            for (int64_t i = 0; i < want; ++i) {
                int64_t id = 0;
                if (fs.done() || !fs.next(f)) damaged(name, at, "fewer than ROWS x K expert ids");
                if (!number(f, 0, it->second - 1, id))
                    damaged(name, at, "'" + shown(f) + "' is not an expert of block " +
                                          std::to_string(layer) + " (0 to " + std::to_string(it->second - 1) + ")");
                t.ids.push_back(int32_t(id));
            }
            if (!fs.done()) damaged(name, at, "more than ROWS x K expert ids");
            t.routes.push_back(TraceRoute{int(layer), rows, first});
        } else if (f == "end") {
            int64_t n = 0;
            if (!fs.next(f) || !number(f, 0, INT64_MAX / 2, n) || !fs.done()) damaged(name, at, "expected 'end N'");
            if (uint64_t(n) != t.routes.size())
                damaged(name, at, "'end' counts " + std::to_string(n) + " route lines, the file has " +
                                      std::to_string(t.routes.size()));
            if (lines.next(line) || lines.cut()) damaged(name, at + 1, "text after the 'end' line");
            return t;
        } else {
            damaged(name, at, "'" + shown(f) + "' is not block, route or end");
        }
    }
}

RoutingTrace read_routing_trace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open the routing trace " + path + ": " + std::strerror(errno) + ".");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error("cannot read the routing trace " + path + ".");
    return parse_routing_trace(text, path);
}

std::string trace_header(const std::string& source, int64_t experts_per_token, const std::vector<PolicyBlock>& blocks) {
    std::string s = std::string(kRoutingTraceMagic) + "\nsource " + source + "\nexperts-per-token " +
                    std::to_string(experts_per_token) + "\n";
    for (const PolicyBlock& b : blocks) s += "block " + std::to_string(b.layer) + " " + std::to_string(b.n_expert) + "\n";
    return s;
}

std::string trace_route_line(int layer, int64_t rows, const int32_t* ids, size_t n) {
    std::string s = "route " + std::to_string(layer) + " " + std::to_string(rows);
    char buf[16];
    for (size_t i = 0; i < n; ++i) {
        buf[0] = ' ';
        const auto r = std::to_chars(buf + 1, buf + sizeof buf, ids[i]);
        s.append(buf, size_t(r.ptr - buf));
    }
    s += '\n';
    return s;
}

std::string format_routing_trace(const RoutingTrace& t) {
    std::string s = trace_header(t.source, t.experts_per_token, t.blocks);
    for (const TraceRoute& r : t.routes)
        s += trace_route_line(r.layer, r.rows, t.ids.data() + r.first, size_t(r.rows * t.experts_per_token));
    s += "end " + std::to_string(t.routes.size()) + "\n";
    return s;
}

void write_routing_trace(const std::string& path, const RoutingTrace& trace) {
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
        out << format_routing_trace(trace);
        out.flush();
        if (!out) {
            const int e = errno;
            std::remove(tmp.c_str());
            throw Error("cannot write the routing trace " + path + ": " + std::strerror(e) + ".");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw Error("cannot write the routing trace " + path + ": " + std::strerror(e) + ".");
    }
}

}  // namespace ds4

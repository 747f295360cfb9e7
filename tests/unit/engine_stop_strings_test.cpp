// Stop strings over streamed text, against the obvious reference: after
// each piece, the text so far cut before the earliest occurrence of any
// stop string (as generation meets them: a stop string that would complete
// later, after an earlier-starting but shorter one completed, never does). Random texts
// over a three-letter alphabet (so partial matches are everywhere), random
// stop strings and random piece boundaries; fresh seed each run. Also: what
// is held back is never longer than the longest stop string less one byte.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/stop_strings.h"
#include "support/test_seed.h"

namespace ds4 {
namespace {

std::string random_word(std::mt19937_64& rng, size_t lo, size_t hi) {
    std::string s(lo + rng() % (hi - lo + 1), 'a');
    for (char& c : s) c = char('a' + rng() % 3);
    return s;
}

TEST(StopStrings, StreamedOutputIsTheTextBeforeTheFirstStop) {
    const uint64_t seed = test::test_seed();
    SCOPED_TRACE(test::seed_note(seed));
    std::mt19937_64 rng(seed);
    int stopped_runs = 0;
    for (int round = 0; round < 3000; ++round) {
        const std::string text = random_word(rng, 0, 40);
        std::vector<std::string> stops;
        for (size_t i = 0, n = rng() % 4; i < n; ++i) stops.push_back(random_word(rng, 0, 5));
        size_t longest = 0;
        for (const auto& s : stops) longest = std::max(longest, s.size());
        // The reference, as generation meets it: after each piece, the
        // earliest occurrence of any stop string in all the text so far.
        auto earliest = [&](const std::string& t) {
            size_t first = std::string::npos;
            for (const auto& s : stops)
                if (!s.empty()) first = std::min(first, t.find(s));
            return first;
        };
        StopStrings st(stops);
        std::string got, fed, want;
        size_t at = 0, first = std::string::npos;
        while (at < text.size() && !st.stopped()) {
            const size_t n = 1 + rng() % 6;
            const std::string piece = text.substr(at, n);
            at += piece.size();
            fed += piece;
            got += st.push(piece);
            first = earliest(fed);
            if (!st.stopped()) {
                ASSERT_LE(fed.size() - got.size(), longest == 0 ? 0 : longest - 1)
                    << "held back more than a stop string's proper prefix";
            }
        }
        want = first == std::string::npos ? text : text.substr(0, first);
        if (!st.stopped()) got += st.flush();
        ASSERT_EQ(got, want) << "text '" << text << "', stop strings: " << [&] { std::string l; for (const auto& s : stops) l += "'" + s + "' "; return l; }();
        ASSERT_EQ(st.stopped(), first != std::string::npos);
        if (st.stopped()) {
            ++stopped_runs;
            ASSERT_EQ(text.compare(first, st.matched().size(), st.matched()), 0);
        }
    }
    EXPECT_GT(stopped_runs, 100);
}

TEST(StopStrings, NothingAfterAStop) {
    StopStrings st({"</s>"});
    EXPECT_EQ(st.push("hello </"), "hello ");
    EXPECT_EQ(st.push("s> more"), "");
    EXPECT_TRUE(st.stopped());
    EXPECT_EQ(st.matched(), "</s>");
    EXPECT_EQ(st.push("again"), "");
    EXPECT_EQ(st.flush(), "");
}

}  // namespace
}  // namespace ds4

// The cluster key: a secret shared by the coordinator and its workers
// (--cluster-key-file FILE, or DS4_CLUSTER_KEY). Every call carries
// "TIME.HMAC-SHA256(key, METHOD|TIME)" in its metadata and a peer accepts
// it within five minutes of its own clock, so the key itself never
// crosses the network. Without TLS a token seen on the wire could be
// replayed inside that window: off a trusted network, add TLS.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ds4 {

inline constexpr char kClusterAuthHeader[] = "ds4-cluster-auth";

class ClusterKey {
public:
    // The key from `file` when given (surrounding whitespace dropped), else
    // from DS4_CLUSTER_KEY; none when neither is set. Throws ds4::Error when
    // the file cannot be read or the key is shorter than 16 characters.
    static std::optional<ClusterKey> load(const std::string& file);
    explicit ClusterKey(std::string secret);

    // The metadata value for a call of `method` now.
    std::string token(std::string_view method) const;
    // Whether `token` was made with this key for `method` within the window.
    bool verify(std::string_view token, std::string_view method) const;

private:
    std::string hmac_hex(std::string_view method, long long time) const;
    std::string secret_;
};

}  // namespace ds4

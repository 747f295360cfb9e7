#include "pipeline/cluster_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace ds4 {

namespace {
constexpr long long kWindowSeconds = 300;
constexpr size_t kMinKeyChars = 16;

std::string trimmed(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t b = 0;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    return s.substr(b);
}

long long now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}
}  // namespace

std::optional<ClusterKey> ClusterKey::load(const std::string& file) {
    std::string secret, where;
    if (!file.empty()) {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw Error("cannot read the cluster key file " + file + ".");
        std::ostringstream ss;
        ss << in.rdbuf();
        secret = trimmed(ss.str());
        where = "the cluster key file " + file;
    } else if (const char* env = std::getenv("DS4_CLUSTER_KEY")) {
        secret = trimmed(env);
        where = "DS4_CLUSTER_KEY";
    } else {
        return std::nullopt;
    }
    if (secret.size() < kMinKeyChars)
        throw Error(where + " holds " + std::to_string(secret.size()) + " characters; a cluster key needs at least " +
                    std::to_string(kMinKeyChars) + ".");
    return ClusterKey(std::move(secret));
}

ClusterKey::ClusterKey(std::string secret) : secret_(std::move(secret)) {}

std::string ClusterKey::hmac_hex(std::string_view method, long long time) const {
    const std::string msg = std::string(method) + "|" + std::to_string(time);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
         reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += hex[mac[i] >> 4];
        out += hex[mac[i] & 15];
    }
    return out;
}

std::string ClusterKey::token(std::string_view method) const {
    const long long t = now_seconds();
    return std::to_string(t) + "." + hmac_hex(method, t);
}

bool ClusterKey::verify(std::string_view token, std::string_view method) const {
    const size_t dot = token.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot > 20) return false;
    long long t = 0;
    for (char c : token.substr(0, dot)) {
        if (c < '0' || c > '9') return false;
        t = t * 10 + (c - '0');
    }
    if (std::llabs(now_seconds() - t) > kWindowSeconds) return false;
    const std::string want = hmac_hex(method, t);
    const std::string_view got = token.substr(dot + 1);
    return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
}

}  // namespace ds4

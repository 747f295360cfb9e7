// Whether the client of a request is still there, asked while its whole
// (non-streamed) reply is being generated: a client that closed its
// connection (a timeout, a user's Ctrl-C, a killed agent) must not keep a
// sequence slot generating for nobody. A stream notices at its next write;
// a whole reply writes nothing until the end, so the socket is watched.
//
// httplib 0.11 hands handlers no socket (newer versions have
// Request::is_connection_closed). Over TLS the request carries its SSL
// connection and with it the descriptor; over plain HTTP the descriptor is
// the one open socket with the request's two addresses (a TCP connection's
// address pair is unique while it is open, and the handler's thread holds
// it open), found once per request among the process's descriptors.
//
// Gone means the peer ended its side (FIN or RST: POLLRDHUP, POLLHUP,
// POLLERR). A client that half-closes after its request counts as gone,
// as httplib already treats it for streams and as nginx does (its 499).
#pragma once

#include <httplib.h>

namespace ds4 {

class ClientConnection {
public:
    explicit ClientConnection(const httplib::Request& req);
    // False when the socket was not found (then the client never counts
    // as gone: the reply is generated whole, as before).
    bool watched() const { return fd_ >= 0; }
    bool gone() const;

private:
    int fd_ = -1;
};

}  // namespace ds4

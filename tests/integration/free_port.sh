# Sourced by the integration tests that start servers: free_port prints a
# loopback TCP port that is free now and lies outside the kernel's ephemeral
# range. A port the kernel picks by itself (a worker listening on port 0, the
# source port of any client's connection, in this test or one running beside
# it) is then never the one a test handed to a server that binds it later:
# asking the kernel for port 0 and releasing it gave a port the next
# connection could take first.
free_port() {
  python3 - <<'PY'
import random, socket
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ports = list(range(10000, lo)) if lo > 12000 else list(range(hi + 1, 65536))
random.shuffle(ports)
for p in ports:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    raise SystemExit("free_port: no free loopback port outside the ephemeral range")
PY
}

// tsglang TCP key-value store client (see kv_store_client.h for the wire format).
#include "kv_store_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tsg {

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int connectOnce(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

/** Reads exactly n bytes before deadlineMs (< 0: none). @returns false on EOF, error or timeout */
bool readFull(int fd, char* p, size_t n, int64_t deadlineMs) {
  while (n > 0) {
    int wait = -1;
    if (deadlineMs >= 0) {
      const int64_t left = deadlineMs - nowMs();
      if (left <= 0) return false;
      wait = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd pfd{fd, POLLIN, 0};
    const int r = poll(&pfd, 1, wait);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool writeFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

void putU32(std::string& s, uint32_t v) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
  s.append(b, 4);
}

uint32_t getU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

}  // namespace

KvStoreClient::KvStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout)
    : host_(host), port_(port), timeout_(timeout) {
  const int64_t deadline = nowMs() + timeout.count();
  while ((fd_ = connectOnce(host, port)) < 0) {
    if (nowMs() >= deadline) throw StoreError("could not connect to the TCP store at " + where() + " within " + std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

KvStoreClient::~KvStoreClient() {
  if (fd_ >= 0) close(fd_);
}

std::string KvStoreClient::where() const { return host_ + ":" + std::to_string(port_); }

std::vector<std::string> KvStoreClient::call(uint8_t op, const std::vector<std::string>& fields, int64_t waitMs) {
  std::string msg;
  msg.push_back(static_cast<char>(op));
  for (const auto& f : fields) {
    putU32(msg, static_cast<uint32_t>(f.size()));
    msg += f;
  }
  std::string frame;
  putU32(frame, static_cast<uint32_t>(msg.size()));
  frame += msg;
  if (!writeFull(fd_, frame.data(), frame.size())) throw StoreError("lost the connection to the TCP store at " + where());
  // The server answers a timed wait itself; allow it a few seconds beyond the wait before giving up on the socket.
  const int64_t deadline = waitMs < 0 ? -1 : nowMs() + waitMs + 5000;
  char hdr[4];
  if (!readFull(fd_, hdr, 4, deadline)) throw StoreError("no answer from the TCP store at " + where());
  const uint32_t len = getU32(hdr);
  std::string body(len, '\0');
  if (len == 0 || !readFull(fd_, &body[0], len, deadline)) throw StoreError("truncated answer from the TCP store at " + where());
  std::vector<std::string> out;
  size_t pos = 1;
  while (pos + 4 <= body.size()) {
    const uint32_t fl = getU32(body.data() + pos);
    pos += 4;
    out.emplace_back(body.substr(pos, fl));
    pos += fl;
  }
  const uint8_t status = static_cast<uint8_t>(body[0]);
  if (status == 1) throw StoreError("timed out after " + std::to_string(waitMs) + " ms waiting for keys in the TCP store at " + where() + (out.empty() ? "" : " (missing: " + out[0] + ")"));
  if (status != 0) throw StoreError("TCP store at " + where() + ": " + (out.empty() ? "error" : out[0]));
  return out;
}

void KvStoreClient::set(const std::string& key, const std::vector<char>& data) {
  call(1, {key, std::string(data.begin(), data.end())}, timeout_.count());
}

std::vector<char> KvStoreClient::get(const std::string& key) {
  auto r = call(2, {key, std::to_string(timeout_.count())}, timeout_.count());
  if (r.empty()) throw StoreError("TCP store at " + where() + ": empty answer to get");
  return std::vector<char>(r[0].begin(), r[0].end());
}

void KvStoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void KvStoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> f{std::to_string(timeout.count())};
  f.insert(f.end(), keys.begin(), keys.end());
  call(3, f, timeout.count());
}

int64_t KvStoreClient::add(const std::string& key, int64_t delta) {
  auto r = call(4, {key, std::to_string(delta)}, timeout_.count());
  return r.empty() ? 0 : std::stoll(r[0]);
}

}  // namespace tsg

// A client of tsglang's TCP key-value store (src/distributed/tcp_store.ts, torch's TCPStore role) implementing Gloo's
// rendezvous Store interface, so connectFullMesh exchanges the pair addresses through it.
//
// Wire format (little endian), one request then one reply per round trip on one TCP connection:
//   request  = u32 length of the rest, u8 op, fields…      op: 1 SET(key, value)  2 GET(key, timeoutMs)
//                                                              3 WAIT(timeoutMs, key…)  4 ADD(key, delta)  5 CHECK(key…)
//   reply    = u32 length of the rest, u8 status, fields…  status: 0 ok, 1 timeout, 2 error (field 0: message)
//   field    = u32 length, bytes; timeoutMs and numbers are decimal ASCII.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace tsg {

/** Thrown on a store timeout or a broken connection; the message names the store address. */
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class KvStoreClient : public gloo::rendezvous::Store {
 public:
  /**
   * Connects (retrying every 100 ms until timeout) to host:port.
   * @param timeout also the default wait of get/wait
   * @throws StoreError when the store cannot be reached in time
   */
  KvStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~KvStoreClient() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  int64_t add(const std::string& key, int64_t delta);

 private:
  std::vector<std::string> call(uint8_t op, const std::vector<std::string>& fields, int64_t waitMs);
  std::string where() const;

  std::string host_;
  int port_;
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
};

}  // namespace tsg

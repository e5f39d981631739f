// EtcdClient's errors tell a request that never reached etcd (refused:
// kUnavailable) from one that may have (sent, no answer: kDeadlineExceeded),
// with no etcd at all: a socket that refuses, and one that takes the
// request and never answers.
#include "store/etcd_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace unipool::store {
namespace {

// A listening socket that never accepts: the kernel completes the
// connection and takes the request's bytes, and no answer ever comes.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 8) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(a.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // A port that refuses: this one, once closed.
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

EtcdOptions Options(std::vector<std::string> endpoints) {
  EtcdOptions o;
  o.endpoints = std::move(endpoints);
  o.timeout = std::chrono::milliseconds(300);
  return o;
}

std::string RefusingUrl() {
  int port = 0;
  { port = SilentListener().port(); }  // closed: nothing listens there now
  return "http://127.0.0.1:" + std::to_string(port);
}

TEST(EtcdClientTest, ARequestThatNeverLeftIsUnavailable) {
  EtcdClient c(Options({RefusingUrl()}));
  Result<EtcdClient::Json> r = c.Call("kv/txn", EtcdClient::Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().message();
  EXPECT_NE(r.status().message().find("cannot reach etcd at"), std::string::npos);
}

TEST(EtcdClientTest, ARequestSentWithoutAnAnswerMayHaveLanded) {
  SilentListener silent;
  EtcdClient c(Options({silent.url()}));
  Result<EtcdClient::Json> r = c.Call("kv/txn", EtcdClient::Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().message();
  Result<EtcdClient::Json> one =
      c.CallAt(0, "kv/txn", EtcdClient::Json::object(), std::chrono::milliseconds(300));
  EXPECT_EQ(one.status().code(), StatusCode::kDeadlineExceeded) << one.status().message();
}

// Tried on every endpoint: one that may have taken the request makes the
// whole call in doubt, whichever endpoint failed last.
TEST(EtcdClientTest, OneEndpointInDoubtMakesTheCallInDoubt) {
  SilentListener silent;
  EtcdClient c(Options({silent.url(), RefusingUrl()}));
  Result<EtcdClient::Json> r = c.Call("kv/range", EtcdClient::Json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().message();
  EXPECT_NE(r.status().message().find("tried"), std::string::npos) << r.status().message();
  EXPECT_TRUE(IsFailure(r.status()));
}

}  // namespace
}  // namespace unipool::store

#include "store/store_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace unipool::store {

std::string TempDir(const std::string& name) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("unipool-store-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

LocalEtcd& SharedEtcd() {
  struct Owned {
    std::string dir = TempDir("etcd");
    std::unique_ptr<LocalEtcd> etcd;
    ~Owned() {
      etcd.reset();
      std::filesystem::remove_all(dir);
    }
  };
  static Owned owned;
  if (!owned.etcd) {
    auto e = LocalEtcd::Start(owned.dir, 1);
    if (!e.ok()) {
      ADD_FAILURE() << e.status().message();
      std::abort();
    }
    owned.etcd = std::move(e).value();
  }
  return *owned.etcd;
}

EtcdOptions EtcdFor(const std::string& name) {
  static std::atomic<int> n{0};
  EtcdOptions o;
  o.endpoints = SharedEtcd().endpoints();
  o.prefix = "/test-" + std::to_string(getpid()) + "-" + name + "-" + std::to_string(n++);
  return o;
}

}  // namespace unipool::store

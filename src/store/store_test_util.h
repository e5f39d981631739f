// Helpers of the store tests: temporary directories and a local etcd.
#pragma once

#include <string>

#include "store/local_etcd.h"
#include "store/store.h"

namespace unipool::store {

// A fresh (removed) path under the temporary directory, unique to this process.
std::string TempDir(const std::string& name);

// One etcd member for this test process (ctest runs each test in a process
// of its own), stopped and removed at exit. A test that kills members
// starts a LocalEtcd of its own.
LocalEtcd& SharedEtcd();

// Options for the shared etcd with a prefix no other test uses.
EtcdOptions EtcdFor(const std::string& name);

}  // namespace unipool::store

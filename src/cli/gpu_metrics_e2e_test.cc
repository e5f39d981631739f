// GPU device metrics end to end: an agent on a node whose nvidia-smi (a
// stand-in on PATH that prints what an H100 node's does) reports two GPUs;
// the server exports their readings with node and gpu labels, and a node
// with virtual GPUs exports none.
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

class GpuMetricsE2eTest : public AgentE2eTest {
 protected:
  GpuMetricsE2eTest() : AgentE2eTest({}, {}, {}, "testdata/clusters/local-3x2.yaml", "auto") {}

  // An nvidia-smi on PATH that answers the agent's queries as an H100 node
  // with two GPUs does; the agents read a kernel log the test writes.
  void FakeNvidiaSmi() {
    const std::string bin = server_.dir() + "/fake-bin";
    fs::create_directories(bin);
    std::ofstream(bin + "/nvidia-smi")
        << "#!/bin/sh\n"
           "case \"$*\" in\n"
           "  *utilization.gpu*) printf '0, 87, 40000, 81559, 61, 455.5, 0\\n"
           "1, 12, 1000, 81559, 40, [N/A], 0\\n' ;;\n"
           "  *ecc.errors*) printf '0, 0, No\\n1, 0, No\\n' ;;\n"
           "  *pci.bus_id*) printf '0, 00000000:18:00.0\\n1, 00000000:2A:00.0\\n' ;;\n"
           "  *) printf '0\\n1\\n' ;;\n"
           "esac\n";
    fs::permissions(bin + "/nvidia-smi",
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
    setenv("PATH", (bin + ":" + path).c_str(), 1);
    kernel_log_ = server_.dir() + "/kern.log";
    std::ofstream(kernel_log_) << "[    1.0] Linux version 6.1.0\n";
    agent_extra_ = {"--kernel-log", kernel_log_};
  }
  void KernelLogs(const std::string& line) { std::ofstream(kernel_log_, std::ios::app) << line; }
  std::string Metrics() { return server_.Call("GET", "/metrics", "viewer").body; }

  std::string kernel_log_;
};

TEST_F(GpuMetricsE2eTest, NvidiaSmiReadingsBecomeMetrics) {
  FakeNvidiaSmi();
  StartAgent("n0");
  WaitNodesUp(1);
  std::string metrics;
  for (int i = 0; i < 100; ++i) {  // the first readings come with a heartbeat after a check
    metrics = server_.Call("GET", "/metrics", "viewer").body;
    if (metrics.find("unipool_gpu_utilization_ratio{node=\"n0\",gpu=\"0\"}") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  for (const char* sample : {"unipool_gpu_utilization_ratio{node=\"n0\",gpu=\"0\"} 0.87",
                             "unipool_gpu_utilization_ratio{node=\"n0\",gpu=\"1\"} 0.12",
                             "unipool_gpu_memory_used_bytes{node=\"n0\",gpu=\"0\"} 41943040000",
                             "unipool_gpu_temperature_celsius{node=\"n0\",gpu=\"0\"} 61",
                             "unipool_gpu_power_watts{node=\"n0\",gpu=\"0\"} 455.5",
                             "unipool_gpu_ecc_uncorrected_errors{node=\"n0\",gpu=\"1\"} 0"}) {
    EXPECT_NE(metrics.find(sample), std::string::npos) << sample << "\n" << metrics;
  }
  // [N/A] gives no sample; the node's health stays ok.
  EXPECT_EQ(metrics.find("unipool_gpu_power_watts{node=\"n0\",gpu=\"1\"}"), std::string::npos);
  EXPECT_EQ(server_.Call("GET", "/v1/nodes/n0", "admin").json()["health"], "ok");
  const std::string dir = server_.dir();
  std::ofstream(dir + "/metrics.txt") << metrics;
  EXPECT_EQ(std::system(("promtool check metrics < " + dir + "/metrics.txt").c_str()), 0);
}

// The driver's Xid errors in the kernel log: a job's own (13) is counted;
// one that needs a GPU reset (79) is counted and drains the node, naming
// the GPU, as DCGM's health watch would.
TEST_F(GpuMetricsE2eTest, XidErrorsAreCountedAndAResetXidDrainsTheNode) {
  FakeNvidiaSmi();
  KernelLogs("[    2.0] NVRM: Xid (PCI:0000:18:00): 79, from before the agent started\n");
  StartAgent("n0");
  WaitNodesUp(1);
  KernelLogs(
      "[  100.0] NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python3, Graphics "
      "Exception\n");
  auto wait_for = [&](const std::string& sample) {
    for (int i = 0; i < 200 && Metrics().find(sample) == std::string::npos; ++i) {
      std::this_thread::sleep_for(50ms);
    }
    return Metrics();
  };
  std::string metrics =
      wait_for("unipool_gpu_xid_errors_total{node=\"n0\",gpu=\"0\",xid=\"13\"} 1");
  EXPECT_NE(metrics.find("unipool_gpu_xid_errors_total{node=\"n0\",gpu=\"0\",xid=\"13\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("xid=\"79\""), std::string::npos) << "read from before the start";
  EXPECT_EQ(server_.Call("GET", "/v1/nodes/n0", "admin").json()["health"], "ok");

  KernelLogs(
      "[  200.0] NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU "
      "has fallen off the bus.\n");
  metrics = wait_for("unipool_gpu_xid_errors_total{node=\"n0\",gpu=\"1\",xid=\"79\"} 1");
  EXPECT_NE(metrics.find("unipool_gpu_xid_errors_total{node=\"n0\",gpu=\"1\",xid=\"79\"} 1"),
            std::string::npos)
      << metrics;
  Json node;
  for (int i = 0; i < 100; ++i) {
    node = server_.Call("GET", "/v1/nodes/n0", "admin").json();
    if (node["state"] == "drained") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(node["state"], "drained") << node.dump();
  EXPECT_NE(node.dump().find("GPU 1: Xid 79 (GPU has fallen off the bus)"), std::string::npos)
      << node.dump();
  std::ofstream(server_.dir() + "/metrics.txt") << metrics;
  EXPECT_EQ(std::system(("promtool check metrics < " + server_.dir() + "/metrics.txt").c_str()), 0);
}

}  // namespace
}  // namespace unipool::testing

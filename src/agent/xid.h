// GPU Xid errors: the NVIDIA driver's reports of a GPU fault, which it
// writes to the kernel log as
//
//   NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//
// The agent tails the kernel log (/dev/kmsg, or a file given with
// --kernel-log), counts each Xid per GPU (the PCI address mapped to the
// index nvidia-smi gives it) and sends the counts with its heartbeats; the
// server exports them as unipool_gpu_xid_errors_total. An Xid that means
// the GPU needs a reset or a repair (DescribeXid: kDrain) fails the node's
// health check until the agent restarts, so the node is drained with the
// Xid as the reason. Xids a job causes (13, 31, 43: its own bug) are only
// counted. This is what DCGM's health watches do, with no DCGM installed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "server/gpu_sample.h"

namespace unipool::agent {

using GpuXidCount = server::GpuXidCount;

struct XidEvent {
  std::string pci;  // normalized, NormalizePciAddress
  int xid = 0;
};

// The Xid reports in kernel log text (dmesg, journalctl -k, /dev/kmsg
// records); other lines are skipped.
std::vector<XidEvent> ParseXidEvents(std::string_view log);

enum class XidAction {
  kCount,  // the job's fault, or information: counted only
  kDrain,  // the GPU needs a reset, a reboot or a repair
};

struct XidInfo {
  std::string_view name;  // "GPU has fallen off the bus"; "" for an Xid not listed
  XidAction action = XidAction::kCount;
};

// What NVIDIA's Xid catalog says of `xid`.
XidInfo DescribeXid(int xid);

// "0000:3b:00" for any of "00000000:3B:00.0" (nvidia-smi), "0000:3b:00"
// (the kernel log) or "3b:00"; "" if `address` is not a PCI address.
std::string NormalizePciAddress(std::string_view address);

// The query and parser of nvidia-smi's GPU index per PCI address.
extern const char* const kGpuBusQuery;
std::map<std::string, int> ParseGpuBusIds(const std::string& csv);

// Reads what a kernel log gains after Open: /dev/kmsg (a record per read)
// or a file that grows. What was logged before Open is not read: a fault
// from before the agent started was seen by the agent that ran then.
// Not thread-safe; one reader.
class KernelLogTail {
 public:
  KernelLogTail() = default;
  KernelLogTail(const KernelLogTail&) = delete;
  KernelLogTail& operator=(const KernelLogTail&) = delete;
  ~KernelLogTail();

  // Errors: kNotFound / kPermissionDenied (not root) / kInvalidArgument,
  // with the path and the cause.
  Status Open(const std::string& path);
  bool is_open() const { return fd_ >= 0; }

  // All that was appended since the last call; "" when nothing was.
  std::string ReadNew();

 private:
  int fd_ = -1;
};

// The Xid counts of a node's GPUs and the first fault that drains it.
class XidLedger {
 public:
  explicit XidLedger(std::map<std::string, int> gpu_by_pci) : gpu_by_pci_(std::move(gpu_by_pci)) {}

  void Add(const std::vector<XidEvent>& events);

  const std::vector<GpuXidCount>& counts() const { return counts_; }
  // "GPU 1: Xid 79 (GPU has fallen off the bus): reset the GPU or reboot,
  // then restart the agent"; "" while no Xid needs a repair.
  const std::string& fault() const { return fault_; }

 private:
  std::map<std::string, int> gpu_by_pci_;
  std::vector<GpuXidCount> counts_;  // in order of first occurrence
  std::string fault_;
};

}  // namespace unipool::agent

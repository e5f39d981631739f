#include "agent/xid.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace unipool::agent {
namespace {

// NVIDIA's Xid catalog, the codes a cluster sees. Those that need a reset,
// a reboot or a repair drain the node; those a job causes are counted.
struct XidRow {
  int xid;
  XidInfo info;
};
constexpr XidRow kXids[] = {
    {13, {"graphics engine exception (usually the job's bug)", XidAction::kCount}},
    {31, {"GPU memory page fault (usually the job's bug)", XidAction::kCount}},
    {43, {"GPU stopped processing (usually the job's bug)", XidAction::kCount}},
    {45, {"preemptive cleanup after an earlier error", XidAction::kCount}},
    {48, {"double-bit ECC error", XidAction::kDrain}},
    {61, {"internal micro-controller breakpoint", XidAction::kDrain}},
    {62, {"internal micro-controller halt", XidAction::kDrain}},
    {63, {"ECC page retirement or row remapping recorded", XidAction::kCount}},
    {64, {"ECC page retirement or row remapping failed", XidAction::kDrain}},
    {74, {"NVLink error", XidAction::kDrain}},
    {79, {"GPU has fallen off the bus", XidAction::kDrain}},
    {92, {"high single-bit ECC error rate", XidAction::kCount}},
    {94, {"contained ECC error (the job that hit it ends)", XidAction::kCount}},
    {95, {"uncontained ECC error", XidAction::kDrain}},
    {119, {"GSP RPC timeout", XidAction::kDrain}},
    {120, {"GSP error", XidAction::kDrain}},
    {140, {"unrecovered ECC error", XidAction::kDrain}},
};

bool IsHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

XidInfo DescribeXid(int xid) {
  for (const XidRow& r : kXids) {
    if (r.xid == xid) return r.info;
  }
  return {};
}

std::string NormalizePciAddress(std::string_view address) {
  address = Trim(address);
  if (size_t dot = address.rfind('.'); dot != std::string_view::npos) {
    address = address.substr(0, dot);  // the function
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    size_t colon = address.find(':', start);
    parts.push_back(address.substr(start, colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() == 2) parts.insert(parts.begin(), "0000");
  if (parts.size() != 3 || !IsHex(parts[0]) || !IsHex(parts[1]) || !IsHex(parts[2]) ||
      parts[1].size() > 2 || parts[2].size() > 2) {
    return "";
  }
  std::string_view domain = parts[0];
  if (domain.size() > 4) {  // nvidia-smi's 8 digits: the upper ones are zero
    if (domain.substr(0, domain.size() - 4).find_first_not_of('0') != std::string_view::npos) {
      return "";
    }
    domain = domain.substr(domain.size() - 4);
  }
  auto pad = [](std::string_view s, size_t n) { return std::string(n - s.size(), '0') + Lower(s); };
  return pad(domain, 4) + ":" + pad(parts[1], 2) + ":" + pad(parts[2], 2);
}

std::vector<XidEvent> ParseXidEvents(std::string_view log) {
  static constexpr std::string_view kTag = "NVRM: Xid (";
  std::vector<XidEvent> out;
  for (size_t at = log.find(kTag); at != std::string_view::npos; at = log.find(kTag, at)) {
    at += kTag.size();
    const size_t end_of_line = std::min(log.find('\n', at), log.size());
    std::string_view line = log.substr(at, end_of_line - at);
    const size_t close = line.find("):");
    if (close == std::string_view::npos) continue;
    std::string_view address = line.substr(0, close);
    if (address.substr(0, 4) == "PCI:") address.remove_prefix(4);
    std::string_view rest = Trim(line.substr(close + 2));
    int xid = 0;
    size_t digits = 0;
    while (digits < rest.size() && digits < 4 &&
           std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      xid = xid * 10 + (rest[digits++] - '0');
    }
    if (digits == 0 || (digits < rest.size() && rest[digits] != ',')) continue;
    std::string pci = NormalizePciAddress(address);
    if (pci.empty()) continue;
    out.push_back({std::move(pci), xid});
  }
  return out;
}

const char* const kGpuBusQuery = "nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader";

std::map<std::string, int> ParseGpuBusIds(const std::string& csv) {
  std::map<std::string, int> out;
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    const size_t comma = line.find(',');
    if (comma == std::string::npos) continue;
    std::string_view index = Trim(std::string_view(line).substr(0, comma));
    if (index.empty() || index.size() > 2 ||
        index.find_first_not_of("0123456789") != std::string_view::npos) {
      continue;
    }
    std::string pci = NormalizePciAddress(std::string_view(line).substr(comma + 1));
    if (!pci.empty()) out[pci] = std::stoi(std::string(index));
  }
  return out;
}

// ---- KernelLogTail -------------------------------------------------------------

KernelLogTail::~KernelLogTail() {
  if (fd_ >= 0) close(fd_);
}

Status KernelLogTail::Open(const std::string& path) {
  if (fd_ >= 0) close(fd_);
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    std::string why = path + ": " + std::strerror(err);
    if (err == ENOENT) return NotFound(why);
    if (err == EACCES || err == EPERM)
      return PermissionDenied(why + " (the agent reads it as root)");
    return InvalidArgument(why);
  }
  lseek(fd_, 0, SEEK_END);  // /dev/kmsg: after the last record; a file: its end
  return Status::Ok();
}

std::string KernelLogTail::ReadNew() {
  std::string out;
  if (fd_ < 0) return out;
  char buf[8192];
  // /dev/kmsg gives one record per read and EAGAIN at the end; EPIPE says
  // records were overwritten before they were read (read on). A file
  // gives 0 at its end.
  for (int records = 0; records < 100000; ++records) {
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (out.back() != '\n') out += '\n';
      continue;
    }
    if (n < 0 && errno == EPIPE) continue;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  return out;
}

// ---- XidLedger ------------------------------------------------------------------

void XidLedger::Add(const std::vector<XidEvent>& events) {
  for (const XidEvent& e : events) {
    auto g = gpu_by_pci_.find(e.pci);
    const int gpu = g == gpu_by_pci_.end() ? -1 : g->second;
    auto c = std::find_if(counts_.begin(), counts_.end(),
                          [&](const GpuXidCount& x) { return x.gpu == gpu && x.xid == e.xid; });
    if (c == counts_.end()) {
      counts_.push_back({gpu, e.xid, 1});
    } else {
      ++c->count;
    }
    const XidInfo info = DescribeXid(e.xid);
    if (fault_.empty() && info.action == XidAction::kDrain) {
      fault_ = (gpu < 0 ? "GPU at PCI " + e.pci : "GPU " + std::to_string(gpu)) + ": Xid " +
               std::to_string(e.xid) + " (" + std::string(info.name) +
               "): reset the GPU or reboot, then restart the agent";
    }
  }
}

}  // namespace unipool::agent

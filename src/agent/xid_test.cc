#include "agent/xid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace unipool::agent {
namespace {

// Lines as the driver writes them (R535-R560), as dmesg prints them and as
// /dev/kmsg gives them (priority, sequence, time; then the message).
constexpr const char* kLog =
    "[ 1234.5678] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
    "fallen off the bus.\n"
    "4,1933,81234567,-;NVRM: Xid (PCI:0000:B7:00): 13, pid=4242, name=python3, Graphics "
    "Exception: ESR 0x404600=0x80000002\n"
    "[ 1240.0] NVRM: Xid (0000:86:00): 48, An uncorrectable double bit error (DBE) has been "
    "detected on GPU in the framebuffer at partition 6, subpartition 0.\n"
    "[ 1241.0] NVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
    "[ 1242.0] NVRM: Xid (PCI:0000:3b:00): notanumber\n"
    "[ 1243.0] NVRM: Xid (PCI:zz): 79, bad address\n"
    "[ 1244.0] NVRM: Xid (PCI:0000:3b:00): 7";

TEST(XidTest, ParsesTheDriversLinesInEveryLogFormat) {
  const std::vector<XidEvent> e = ParseXidEvents(kLog);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].pci, "0000:3b:00");
  EXPECT_EQ(e[0].xid, 79);
  EXPECT_EQ(e[1].pci, "0000:b7:00");
  EXPECT_EQ(e[1].xid, 13);
  EXPECT_EQ(e[2].pci, "0000:86:00");
  EXPECT_EQ(e[2].xid, 48);
  EXPECT_EQ(e[3].xid, 7);  // cut short, as a partial read may leave it: still a number
  EXPECT_TRUE(ParseXidEvents("").empty());
  EXPECT_TRUE(ParseXidEvents("NVRM: Xid (").empty());
  EXPECT_TRUE(ParseXidEvents("NVRM: Xid (PCI:0000:3b:00): 99999999999999, x").empty());
}

TEST(XidTest, PciAddressesMatchAcrossNvidiaSmiAndTheKernel) {
  EXPECT_EQ(NormalizePciAddress("00000000:3B:00.0"), "0000:3b:00");
  EXPECT_EQ(NormalizePciAddress("0000:3b:00"), "0000:3b:00");
  EXPECT_EQ(NormalizePciAddress(" 3b:0 "), "0000:3b:00");
  EXPECT_EQ(NormalizePciAddress("00010000:3B:00.0"), "");  // a domain past 16 bits
  EXPECT_EQ(NormalizePciAddress("0000:3b:00:00"), "");
  EXPECT_EQ(NormalizePciAddress("0000:xyz:00"), "");
  EXPECT_EQ(NormalizePciAddress(""), "");
  const std::map<std::string, int> ids =
      ParseGpuBusIds("0, 00000000:3B:00.0\n1, 00000000:86:00.0\nbad\nx, 00000000:87:00.0\n");
  EXPECT_EQ(ids, (std::map<std::string, int>{{"0000:3b:00", 0}, {"0000:86:00", 1}}));
}

TEST(XidTest, RepairXidsDrainAndTheJobsOwnAreOnlyCounted) {
  EXPECT_EQ(DescribeXid(79).action, XidAction::kDrain);
  EXPECT_EQ(DescribeXid(48).action, XidAction::kDrain);
  EXPECT_EQ(DescribeXid(13).action, XidAction::kCount);
  EXPECT_EQ(DescribeXid(31).action, XidAction::kCount);
  EXPECT_EQ(DescribeXid(12345).name, "");
  XidLedger ledger({{"0000:3b:00", 0}, {"0000:b7:00", 1}});
  ledger.Add(ParseXidEvents(
      "NVRM: Xid (PCI:0000:b7:00): 13, pid=1\nNVRM: Xid (PCI:0000:b7:00): 13, pid=2\n"));
  EXPECT_EQ(ledger.fault(), "");
  ledger.Add(ParseXidEvents(kLog));
  ASSERT_EQ(ledger.counts().size(), 4u);
  EXPECT_EQ(ledger.counts()[0].gpu, 1);
  EXPECT_EQ(ledger.counts()[0].xid, 13);
  EXPECT_EQ(ledger.counts()[0].count, 3);
  EXPECT_EQ(ledger.counts()[1].gpu, 0);
  EXPECT_EQ(ledger.counts()[1].xid, 79);
  EXPECT_EQ(ledger.counts()[2].gpu, -1);  // 0000:86:00 is no GPU nvidia-smi listed
  EXPECT_EQ(ledger.fault(),
            "GPU 0: Xid 79 (GPU has fallen off the bus): reset the GPU or reboot, then restart "
            "the agent");
}

TEST(XidTest, TheTailReadsOnlyWhatIsAppended) {
  const std::string path = ::testing::TempDir() + "/xid-kern.log";
  std::ofstream(path) << "NVRM: Xid (PCI:0000:3b:00): 79, before the agent\n";
  KernelLogTail tail;
  ASSERT_TRUE(tail.Open(path).ok());
  EXPECT_EQ(tail.ReadNew(), "");
  std::ofstream(path, std::ios::app) << "NVRM: Xid (PCI:0000:3b:00): 48, after\n";
  EXPECT_EQ(ParseXidEvents(tail.ReadNew()).size(), 1u);
  EXPECT_EQ(tail.ReadNew(), "");
  Status missing = KernelLogTail().Open(::testing::TempDir() + "/no-such-log");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("no-such-log"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace unipool::agent

#include "io/quantity.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

int64_t Cpu(const char* s) {
  Result<int64_t> r = ParseMilliCpu(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

int64_t Mem(const char* s) {
  Result<int64_t> r = ParseByteQuantity(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

TEST(QuantityTest, CpuAsKubernetesWritesIt) {
  EXPECT_EQ(Cpu("2"), 2000);
  EXPECT_EQ(Cpu("0.5"), 500);
  EXPECT_EQ(Cpu("500m"), 500);
  EXPECT_EQ(Cpu("1.25"), 1250);
  EXPECT_EQ(Cpu(".5"), 500);
  EXPECT_EQ(Cpu("0.0001"), 1) << "a fraction of a thousandth rounds up";
  EXPECT_EQ(Cpu("100000u"), 100);
  EXPECT_EQ(Cpu("1e3"), 1000000);
  EXPECT_EQ(Cpu("2k"), 2000000);
}

TEST(QuantityTest, BytesAsKubernetesWritesThem) {
  EXPECT_EQ(Mem("64Gi"), int64_t{64} << 30);
  EXPECT_EQ(Mem("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(Mem("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(Mem("1G"), 1000000000);
  EXPECT_EQ(Mem("129e6"), 129000000);
  EXPECT_EQ(Mem("128974848"), 128974848);
  EXPECT_EQ(Mem("1500m"), 2) << "1.5 bytes rounds up";
  EXPECT_EQ(Mem("1Ei"), int64_t{1} << 60);
  EXPECT_EQ(Mem("0.000000000000000001E18"), 1);
}

TEST(QuantityTest, BadQuantitiesSayWhy) {
  struct Case {
    const char* text;
    const char* cause;
  } cases[] = {
      {"", "expected a number"},
      {"Gi", "expected a number"},
      {"-1", "expected a number"},
      {"1.2.3", "unknown suffix"},
      {"2 cores", "unknown suffix"},
      {"64GB", "unknown suffix"},
      {"1e", "unknown suffix"},
      {"1e123", "unknown suffix"},
      {"0", "more than 0"},
      {"0.000Gi", "more than 0"},
      {"2Ei", "more than"},
      {"1e30", "more than"},
      {"1234567890123456789", "18 significant digits"},
  };
  for (const Case& c : cases) {
    Result<int64_t> r = ParseByteQuantity(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.cause), std::string::npos)
        << c.text << ": " << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  EXPECT_FALSE(ParseMilliCpu("2000000").ok()) << "more than a million cores";
}

}  // namespace
}  // namespace unipool::io

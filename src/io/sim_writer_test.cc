#include "io/sim_writer.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace unipool::io {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Samples a second apart stay a second apart: at 3 decimals of an hour the
// series put 0 s and 1 s at the same time and 2 s at 7.2 s.
TEST(SimSeriesCsvTest, TimesKeepTheirSeconds) {
  sim::SimOutput out;
  for (int64_t s : {0, 1, 2, 3600, 5400}) {
    sim::Sample sample;
    sample.t = Time(0) + Seconds(s);
    sample.allocated_gpus = 8;
    sample.lost_gpu_seconds = 8 * s;
    sample.useful_gpu_seconds = 4.5 * static_cast<double>(s);
    sample.it_watts = 3584000 + 530 * s;
    out.series.push_back(sample);
  }
  SimRun run;
  run.summary.policy = "fifo";
  run.output = &out;
  const std::vector<std::string> lines = Lines(SimSeriesCsv({run}));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[1], "fifo,0,8,0,0,0,0,0,0,0,3.584");
  EXPECT_EQ(lines[2], "fifo,0.000277778,8,0,0,0,0,0.002222222,0,0.00125,3.58453");
  EXPECT_EQ(lines[3], "fifo,0.000555556,8,0,0,0,0,0.004444444,0,0.0025,3.58506");
  EXPECT_EQ(lines[4], "fifo,1,8,0,0,0,0,8,0,4.5,5.492");
  EXPECT_EQ(lines[5], "fifo,1.5,8,0,0,0,0,12,0,6.75,6.446");
}

}  // namespace
}  // namespace unipool::io

#include "core/perf/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace unipool::perf {
namespace {

// Two tiers: 8-GPU NVLink nodes (300 GB/s, 1 us) under a 64-GPU switch
// (25 GB/s per GPU, 5 us).
HardwareView TwoTiers(int64_t gpus = 64) {
  HardwareView hw;
  hw.gpu = *FindBuiltinGpuModel("A100-SXM4-80GB");
  hw.gpus = gpus;
  hw.tiers = {{"nvlink", 8, 300e9, 1e-6}, {"ib", gpus, 25e9, 5e-6}};
  return hw;
}

TEST(CostModelTest, RingAllReduceTextbook) {
  // 2 (n-1)/n S/B + 2 (n-1) alpha = 2 * 7/8 * 1 GB / 100 GB/s + 14 us.
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(1e9, 8, 100e9, 1e-6), 0.0175 + 14e-6);
  EXPECT_EQ(RingAllReduceSeconds(1e9, 1, 100e9, 1e-6), 0);
}

TEST(CostModelTest, ChunkLayersDealTheRemainderRoundRobin) {
  // 126 layers, 16 stages, 2 chunks each: 30 chunks of 4 then 2 of 3, so the
  // last two stages hold 7 layers and the heaviest 8 = ceil(126/16).
  const std::vector<int32_t> c = ChunkLayers(126, 16, 2);
  ASSERT_EQ(c.size(), 32u);
  EXPECT_EQ(c[0], 4);
  EXPECT_EQ(c[29], 4);
  EXPECT_EQ(c[30], 3);
  EXPECT_EQ(c[31], 3);
  for (int32_t v : {1, 2, 3, 4, 7}) {
    const std::vector<int32_t> chunks = ChunkLayers(126, 16, v);
    int32_t total = 0, heaviest = 0;
    for (int32_t stage = 0; stage < 16; ++stage) {
      int32_t layers = 0;
      for (int32_t k = 0; k < v; ++k) layers += chunks[static_cast<size_t>(k * 16 + stage)];
      total += layers;
      heaviest = std::max(heaviest, layers);
    }
    EXPECT_EQ(total, 126) << v;
    EXPECT_EQ(heaviest, MaxStageLayers(126, 16)) << v;
  }
  EXPECT_EQ(MaxStageLayers(126, 16), 8);
  EXPECT_EQ(MaxStageLayers(96, 12), 8);
}

TEST(CostModelTest, BubbleFraction) {
  EXPECT_DOUBLE_EQ(BubbleFraction(16, 1, 16), 15.0 / 16);   // 1F1B
  EXPECT_DOUBLE_EQ(BubbleFraction(16, 4, 64), 15.0 / 256);  // interleaved, v = 4
  EXPECT_DOUBLE_EQ(BubbleFraction(1, 1, 8), 0);
}

TEST(CostModelTest, ModelStatePerZeroStage) {
  // 16 bytes per parameter unsharded (ZeRO paper: 2 + 2 + 12).
  EXPECT_DOUBLE_EQ(ModelState(1e9, 0, 8).total(), 16e9);
  const ModelStateBytes z1 = ModelState(1e9, 1, 8);
  EXPECT_DOUBLE_EQ(z1.weights, 2e9);
  EXPECT_DOUBLE_EQ(z1.grads, 2e9);
  EXPECT_DOUBLE_EQ(z1.optimizer, 1.5e9);
  EXPECT_DOUBLE_EQ(ModelState(1e9, 2, 8).total(), 2e9 + 14e9 / 8);
  EXPECT_DOUBLE_EQ(ModelState(1e9, 3, 8).total(), 2e9);
}

TEST(CostModelTest, ActivationsFollowKorthikanti) {
  const ModelSpec m = *FindBuiltinModel("gpt3-175b");  // MHA, 4h GeLU
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  Plan p;
  p.micro_batch = 1;
  p.sequence_parallel = false;
  const double sbh = s * b * h;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kNone),
                   sbh * (34 + 5 * a * s / h));
  p.tp = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kNone),
                   sbh * (10 + 24 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kFull), 2 * sbh);
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kNone),
                   sbh / t * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kSelective), 34 * sbh / t);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, true, Recompute::kNone), 34 * sbh / t);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, false, false, Recompute::kFull), 2 * sbh / t);
}

TEST(CostModelTest, MembersWithinTiers) {
  const HardwareView hw = TwoTiers();
  EXPECT_EQ(MembersWithin(hw, {8, 1}, 0), 8);
  EXPECT_EQ(MembersWithin(hw, {16, 1}, 0), 8);
  EXPECT_EQ(MembersWithin(hw, {16, 1}, 1), 16);
  EXPECT_EQ(MembersWithin(hw, {8, 8}, 0), 1);        // one member per node
  EXPECT_EQ(MembersWithin(hw, {2, 2, 4, 8}, 0), 2);  // {0, 2} x {0, 8, 16, 24}
  EXPECT_EQ(MembersWithin(hw, {2, 2, 4, 8}, 1), 8);
}

TEST(CostModelTest, AllReduceInsideNvlinkIsARing) {
  const HardwareView hw = TwoTiers();
  const CommCost c = CollectiveTime(hw, Collective::kAllReduce, {8, 1}, 1e9);
  const double bw = 300e9 * kScaleUpLinkEfficiency;
  EXPECT_DOUBLE_EQ(c.seconds, 2 * (7.0 / 8 * 1e9 / bw + 7 * 1e-6) + kCollectiveOverheadS);
  EXPECT_EQ(c.top_tier, 0);
  EXPECT_EQ(c.algorithm, Algorithm::kRing);
}

TEST(CostModelTest, RingAcrossNodesUsesEveryNicOfTheNode) {
  const HardwareView hw = TwoTiers();
  // 16 ranks on two full nodes: 8 NICs per node carry the ring.
  const CommCost c = CollectiveTime(hw, Collective::kAllReduce, {16, 1}, 1e9);
  const double bw = 8 * 25e9 * kScaleOutLinkEfficiency;
  EXPECT_DOUBLE_EQ(c.seconds, 2 * (15.0 / 16 * 1e9 / bw + 15 * 5e-6) + kCollectiveOverheadS);
  EXPECT_EQ(c.top_tier, 1);
  // One rank per node: one NIC each, 8x slower.
  const CommCost d = CollectiveTime(hw, Collective::kAllReduce, {8, 8}, 1e9);
  EXPECT_GT(d.seconds, 6 * c.seconds);
  // Without aggregation (ZeRO-3 style) the full-node ring is as slow.
  const CommCost e = CollectiveTime(hw, Collective::kAllReduce, {16, 1}, 1e9, false);
  EXPECT_GT(e.seconds, 6 * c.seconds);
}

TEST(CostModelTest, SmallMessagesOnBigGroupsAvoidTheFlatRing) {
  HardwareView hw = TwoTiers(4096);
  hw.tiers = {{"nvlink", 8, 300e9, 1e-6}, {"leaf", 256, 25e9, 5e-6}, {"top", 4096, 25e9, 20e-6}};
  const CommCost c = CollectiveTime(hw, Collective::kAllReduce, {4096, 1}, 1e6);
  EXPECT_NE(c.algorithm, Algorithm::kRing);
  EXPECT_LT(c.seconds, RingAllReduceSeconds(1e6, 4096, 184e9, 20e-6));
}

TEST(CostModelTest, ReduceScatterIsHalfAnAllReduce) {
  const HardwareView hw = TwoTiers();
  const double ar = CollectiveTime(hw, Collective::kAllReduce, {8, 1}, 1e9).seconds;
  const double rs = CollectiveTime(hw, Collective::kReduceScatter, {8, 1}, 1e9).seconds;
  const double ag = CollectiveTime(hw, Collective::kAllGather, {8, 1}, 1e9).seconds;
  EXPECT_DOUBLE_EQ(rs, ag);
  EXPECT_NEAR(rs + ag, ar + kCollectiveOverheadS, 1e-12);  // two calls instead of one
}

TEST(CostModelTest, AllToAllAndP2p) {
  const HardwareView hw = TwoTiers();
  // 16 ranks over two nodes: half of each GPU's data leaves the node.
  const CommCost a = CollectiveTime(hw, Collective::kAllToAll, {16, 1}, 1e9);
  EXPECT_DOUBLE_EQ(a.seconds,
                   0.5e9 / (25e9 * kScaleOutLinkEfficiency) + 5e-6 + kCollectiveOverheadS + 15e-6);
  const CommCost p = CollectiveTime(hw, Collective::kP2P, {2, 8}, 1e8);
  EXPECT_DOUBLE_EQ(p.seconds, 1e8 / (25e9 * kScaleOutLinkEfficiency) + 5e-6 + kCollectiveOverheadS);
  EXPECT_EQ(CollectiveTime(hw, Collective::kP2P, {2, 1}, 1e8).top_tier, 0);
}

Job Gpt(const char* name, int64_t batch) {
  Job j{*FindBuiltinModel(name), batch, {}};
  return j;
}

TEST(CostModelTest, CheckPlanRejectsBrokenSplits) {
  const Job job = Gpt("gpt3-175b", 64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  EXPECT_TRUE(CheckPlan(job, 64, p).ok());
  EXPECT_NE(CheckPlan(job, 128, p).message().find("not the 128 GPUs"), std::string::npos);
  p.tp = 64;
  p.pp = 1;
  EXPECT_NE(CheckPlan(job, 64, p).message().find("attention heads"), std::string::npos);
  p = {};
  p.dp = 64;
  p.micro_batch = 2;  // 64 x 2 does not divide 64
  EXPECT_FALSE(CheckPlan(job, 64, p).ok());
  p.micro_batch = 1;
  p.ep = 2;
  EXPECT_NE(CheckPlan(job, 64, p).message().find("mixture-of-experts"), std::string::npos);
}

TEST(CostModelTest, BreakdownSumsToTheStep) {
  const Job job = Gpt("gpt3-175b", 512);
  const HardwareView hw = TwoTiers();
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.vpp = 2;
  p.dp = 2;
  p.zero = 1;
  p.recompute = Recompute::kSelective;
  Result<Estimate> e = Evaluate(job, hw, p);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const TimeBreakdown& t = e->time;
  EXPECT_EQ(t.step, t.compute + t.recompute + t.exposed_comm() + t.bubble + t.optimizer);
  EXPECT_EQ(e->micro_batches, 256);
  EXPECT_DOUBLE_EQ(e->bubble_fraction, 3.0 / 512);
  EXPECT_NEAR(e->tokens_per_s, 512.0 * 2048 / e->step_s, 1e-6);
  const double flops = TrainingFlops(job.model, 512, Recompute::kSelective).model;
  EXPECT_NEAR(e->mfu, flops / e->step_s / 64 / 312e12, 1e-12);
  EXPECT_GT(e->mfu, 0.3);
  EXPECT_LT(e->mfu, 0.7);
  EXPECT_EQ(t.comm_tier[static_cast<size_t>(CommPart::kTp)], 0);
  EXPECT_EQ(t.comm_tier[static_cast<size_t>(CommPart::kPp)], 1);
  const MemoryBreakdown& m = e->memory;
  EXPECT_EQ(m.total, m.weights + m.grads + m.optimizer + m.activations + m.buffers + m.reserve);
  EXPECT_TRUE(m.fits());
}

TEST(CostModelTest, TpAcrossNodesCostsMore) {
  const Job job = Gpt("gpt3-175b", 512);
  const HardwareView hw = TwoTiers();
  Plan in, out;
  in.tp = 8;
  in.pp = 8;
  out.tp = 16;
  out.pp = 4;
  const Estimate a = *Evaluate(job, hw, in), b = *Evaluate(job, hw, out);
  const size_t tp = static_cast<size_t>(CommPart::kTp);
  EXPECT_EQ(b.time.comm_tier[tp], 1);
  EXPECT_GT(b.time.comm[tp], a.time.comm[tp]);
}

TEST(CostModelTest, MoreShardingLessMemory) {
  const Job job = Gpt("gpt3-175b", 512);
  const HardwareView hw = TwoTiers();
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  Bytes last = EstimateMemory(job, hw, p).total;
  for (int z = 1; z <= 3; ++z) {
    p.zero = z;
    const Bytes now = EstimateMemory(job, hw, p).total;
    EXPECT_LT(now, last) << "zero " << z;
    last = now;
  }
  p.recompute = Recompute::kFull;
  EXPECT_LT(EstimateMemory(job, hw, p).activations, last);
}

// Megatron-LM's op-by-op fp32 loss adds (52 - 12) bytes of HBM traffic per
// logit, forward and backward, on the stage with the logits.
TEST(CostModelTest, AnUnfusedLossCostsItsTrafficPerLogit) {
  Job job = Gpt("gpt3-175b", 64);
  const HardwareView hw = TwoTiers();
  Plan p;
  p.tp = 8;
  p.pp = 8;
  const Estimate fused = *Evaluate(job, hw, p);
  job.framework.fused_cross_entropy = false;
  const Estimate unfused = *Evaluate(job, hw, p);
  const double logits_per_gpu = 64.0 * 2048 * job.model.vocab / p.tp;  // one DP replica
  const double hbm = static_cast<double>(hw.gpu.hbm_bandwidth.value()) / 8 * kHbmEfficiency;
  const double extra = (kUnfusedLossTrafficBytesPerLogit - kLossTrafficBytesPerLogit) *
                       logits_per_gpu / hbm * (1 + (p.pp - 1.0) / 64);  // bubble included
  EXPECT_NEAR(unfused.step_s - fused.step_s, extra, extra * 1e-6);
}

// Ring attention gathers the K and V of the rank's own heads: with 8 KV heads
// over TP 8 each rank gathers one head's, not all eight.
TEST(CostModelTest, RingAttentionGathersOnlyTheRanksKvHeads) {
  Job job = Gpt("gpt3-175b", 64);
  job.model.kv_heads = 8;
  const HardwareView hw = TwoTiers();
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.cp = 2;
  const Estimate e = *Evaluate(job, hw, p);
  const double tokens = 2048.0 / p.cp;
  const double one_head = 2 * kActBytes * tokens * job.model.head_size() * p.cp;  // K and V
  const CommCost ag = CollectiveTime(hw, Collective::kAllGather, {p.cp, p.tp}, one_head);
  // Forward, backward (twice: dK, dV back) per layer, 24 layers a stage, 64 micro-batches.
  const double expected = 3 * ag.seconds * 24 * 64;
  EXPECT_NEAR(ToSeconds(e.time.comm_total[static_cast<size_t>(CommPart::kCp)]), expected,
              expected * 1e-6);
}

}  // namespace
}  // namespace unipool::perf

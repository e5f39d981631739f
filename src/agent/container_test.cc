#include "agent/container.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace unipool::agent {
namespace {

using Strings = std::vector<std::string>;

ContainerRun SampleRun() {
  ContainerRun r;
  r.image = "ghcr.io/acme/train:1";
  r.workdir = "/workspace";
  r.uid = 1001;
  r.gid = 1002;
  r.mounts = {{"/shared/pvc/data", "/data", true}, {"/ckpt/job-7", "/ckpt/job-7", false}};
  r.devices = {"/dev/nvidia3", "/dev/nvidiactl"};
  r.env_names = {"RANK", "CUDA_VISIBLE_DEVICES"};
  r.gpus = "3";
  r.command = {"torchrun", "train.py"};
  return r;
}

TEST(ContainerTest, PodmanGetsTheJobsUserMountsDevicesAndEnvironment) {
  Result<Strings> argv = ExpandTemplate(RuntimeTemplate("podman").value(), SampleRun());
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(*argv, (Strings{"podman",
                            "run",
                            "--rm",
                            "--network",
                            "host",
                            "--ipc",
                            "host",
                            "--user",
                            "1001:1002",
                            "--cap-drop",
                            "ALL",
                            "--security-opt",
                            "no-new-privileges",
                            "--env",
                            "RANK",
                            "--env",
                            "CUDA_VISIBLE_DEVICES",
                            "--volume",
                            "/shared/pvc/data:/data:ro",
                            "--volume",
                            "/ckpt/job-7:/ckpt/job-7:rw",
                            "--device",
                            "/dev/nvidia3",
                            "--device",
                            "/dev/nvidiactl",
                            "--workdir",
                            "/workspace",
                            "ghcr.io/acme/train:1",
                            "torchrun",
                            "train.py"}));
}

TEST(ContainerTest, EveryBuiltInRuntimeExpands) {
  for (const char* name : {"podman", "docker", "apptainer", "enroot"}) {
    Result<Strings> argv = ExpandTemplate(RuntimeTemplate(name).value(), SampleRun());
    ASSERT_TRUE(argv.ok()) << name << ": " << argv.status().message();
    EXPECT_EQ(argv->front(), name);
    EXPECT_EQ(argv->back(), "train.py") << name << ": the command comes last";
    EXPECT_NE(std::find(argv->begin(), argv->end(), "ghcr.io/acme/train:1"), argv->end()) << name;
  }
  Result<Strings> apptainer = ExpandTemplate(RuntimeTemplate("apptainer").value(), SampleRun());
  EXPECT_NE(std::find(apptainer->begin(), apptainer->end(), "/shared/pvc/data:/data:ro"),
            apptainer->end());
  EXPECT_FALSE(RuntimeTemplate("rkt").ok());
}

// bwrap runs an unpacked root filesystem: each of its top-level entries
// read-only, then /proc, /dev, a fresh /tmp, the GPUs and the mounts.
TEST(ContainerTest, BwrapBindsTheImageDirectoryEntryByEntry) {
  const std::string image = ::testing::TempDir() + "/rootfs-" + std::to_string(getpid());
  std::filesystem::create_directories(image + "/bin");
  std::filesystem::create_directories(image + "/etc");
  ContainerRun r = SampleRun();
  r.image = image;
  r.mounts.resize(1);
  r.devices.resize(1);
  Result<Strings> argv = ExpandTemplate(RuntimeTemplate("bwrap").value(), r);
  ASSERT_TRUE(argv.ok()) << argv.status().message();
  EXPECT_EQ(*argv, (Strings{"bwrap",
                            "--die-with-parent",
                            "--unshare-all",
                            "--share-net",
                            "--tmpfs",
                            "/",
                            "--ro-bind",
                            image + "/bin",
                            "/bin",
                            "--ro-bind",
                            image + "/etc",
                            "/etc",
                            "--proc",
                            "/proc",
                            "--dev",
                            "/dev",
                            "--tmpfs",
                            "/tmp",
                            "--dev-bind",
                            "/dev/nvidia3",
                            "/dev/nvidia3",
                            "--ro-bind",
                            "/shared/pvc/data",
                            "/data",
                            "--chdir",
                            "/workspace",
                            "--",
                            "torchrun",
                            "train.py"}));
  r.image = image + "/missing";
  Result<Strings> none = ExpandTemplate(RuntimeTemplate("bwrap").value(), r);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("is not a directory on this node"), std::string::npos);
  std::filesystem::remove_all(image);
}

TEST(ContainerTest, CustomTemplatesAreCheckedWhenExpanded) {
  EXPECT_EQ(ExpandTemplate("run {image} -g {gpus} -- {command}", SampleRun()).value(),
            (Strings{"run", "ghcr.io/acme/train:1", "-g", "3", "--", "torchrun", "train.py"}));
  for (const auto& [tmpl, error] : std::vector<std::pair<std::string, std::string>>{
           {"run {imag} {command}", "unknown placeholder {imag}"},
           {"run {volumes:-v {src}} {command}", "unknown placeholder {volumes:...}"},
           {"run {mounts:-v {source}} {command}", "unknown placeholder {source}"},
           {"run {image", "unbalanced '{'"},
           {"run {image}", "no {command}"}}) {
    Result<Strings> r = ExpandTemplate(tmpl, SampleRun());
    ASSERT_FALSE(r.ok()) << tmpl;
    EXPECT_NE(r.status().message().find(error), std::string::npos) << r.status().message();
  }
}

TEST(ContainerTest, OnlyExistingGpuDevicesAreBound) {
  // A machine without NVIDIA devices (CI) binds none; /dev/nvidiactl only
  // comes with a GPU.
  for (const std::string& d : GpuDevices({0, 1})) EXPECT_TRUE(std::filesystem::exists(d)) << d;
  if (!std::filesystem::exists("/dev/nvidia0")) EXPECT_TRUE(GpuDevices({0}).empty());
}

}  // namespace
}  // namespace unipool::agent

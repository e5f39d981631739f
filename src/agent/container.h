// Container: runs a task of a job that names an image through the node's
// OCI runtime, as a command template the agent expands per process. The
// runtime starts as the job's user (identity.h) with the process's whole
// environment; it sees the image, the job's directories and its volumes,
// its GPUs (CUDA_VISIBLE_DEVICES and the /dev/nvidia* devices) and the host
// network (rendezvous between nodes).
//
// A template is words separated by spaces; each word may hold placeholders:
//   {image} {workdir} {uid} {gid} {gpus}         one value
//   {command}                                    the job's argv, as words
//   {mounts:WORDS}  WORDS for each mount, with {src} {dst} {mode} (ro|rw)
//                   and {bind} (--ro-bind|--bind)
//   {devices:WORDS} WORDS for each GPU device node, with {dev}
//   {env:WORDS}     WORDS for each environment variable, with {name}
//   {rootfs:WORDS}  WORDS for each top-level entry of the image directory,
//                   with {src} {dst} (runtimes that take a directory)
// Built in: bwrap (an unpacked root filesystem: works unprivileged, the one
// the tests run), podman, docker, apptainer and enroot.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace unipool::agent {

struct ContainerMount {
  std::string src;  // on the host
  std::string dst;  // in the container
  bool read_only = false;
};

// What one process's container is made of.
struct ContainerRun {
  std::string image;
  std::string workdir;  // in the container; "" = "/"
  unsigned uid = 0, gid = 0;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> devices;    // e.g. /dev/nvidia0, /dev/nvidiactl
  std::vector<std::string> env_names;  // passed from the runtime's environment
  std::string gpus;                    // CUDA_VISIBLE_DEVICES
  std::vector<std::string> command;
};

// The template of a built-in runtime. Errors: kInvalidArgument naming the
// known ones.
Result<std::string> RuntimeTemplate(const std::string& name);

// Expands `tmpl` for `run`. Errors: an unknown placeholder, unbalanced
// braces, no {command}; for {rootfs:...}, an image that is not a directory.
Result<std::vector<std::string>> ExpandTemplate(const std::string& tmpl, const ContainerRun& run);

// The NVIDIA device nodes a task with `gpus` (indexes) needs, of those that
// exist on this node: /dev/nvidiaN, nvidiactl, nvidia-uvm, nvidia-uvm-tools.
std::vector<std::string> GpuDevices(const std::vector<int>& gpus);

}  // namespace unipool::agent

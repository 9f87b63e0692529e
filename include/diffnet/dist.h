// Data-parallel training on PyTorch's c10d (docs/train.md, "Several processes"): where a process sits in
// the world (torchrun / Slurm environment), its process group (Gloo for CPU tensors, NCCL for CUDA) and
// the few collectives the trainer uses. The c10d headers stay inside dist.cpp.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace diffnet {

struct DistEnv {
  int rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;  // "torchrun" (RANK/WORLD_SIZE...), "slurm" (SLURM_PROCID...), "" (one process)
  bool distributed() const { return world > 1 || !source.empty(); }
};
// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, else SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID (MASTER_ADDR/MASTER_PORT still needed). Error naming the variable on a bad value.
DistEnv read_dist_env();

// Whether this build can make a process group of `backend` ("gloo" | "nccl"); which ones compiled in
// depends on the LibTorch (CMakeLists.txt probes).
bool dist_backend_available(const std::string& backend);

// A process group of the world. Every call is a collective: all ranks make it in the same order. A
// failed or timed-out collective throws Error "rank R: lost contact with the other ranks during <what>".
class DistGroup {
 public:
  // backend: "gloo" | "nccl" | "auto" (nccl when device is CUDA, else gloo). Rendezvous through a
  // TCPStore served by rank 0 at master_addr:master_port; every collective waits at most `timeout_s`.
  DistGroup(const DistEnv& env, const std::string& backend, const std::string& device, double timeout_s);
  ~DistGroup();
  DistGroup(const DistGroup&) = delete;
  DistGroup& operator=(const DistGroup&) = delete;

  int rank() const;
  int world() const;
  const std::string& backend() const;

  // In place: rank 0's values everywhere.
  void broadcast(std::vector<at::Tensor>& tensors, const std::string& what);
  // In place: the mean over ranks. Tensors of one dtype and device are flattened into buckets of at
  // most bucket_bytes each (one all-reduce per bucket). Undefined tensors are skipped.
  void average(const std::vector<at::Tensor>& tensors, const std::string& what, int64_t bucket_bytes = 25 << 20);
  // In place: the sum over ranks.
  void sum(at::Tensor& tensor, const std::string& what);
  // Rank 0's string on every rank (the store carries it; `key` names it, once per key).
  std::string share(const std::string& key, const std::string& value);
  void barrier(const std::string& what);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `diffnet train --nproc N`: runs `argv` (this program, with --nproc removed) as N worker processes on
// this machine with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR=127.0.0.1/MASTER_PORT (a free port) set and,
// unless the thread count was given, DIFFNET_THREADS = usable cores / N. Their output is forwarded line
// by line with a "[rank R] " prefix. When one exits non-zero or is killed, the launcher says which and
// why, stops the others (SIGTERM, then SIGKILL after 10 s) and returns non-zero; else 0.
int launch_local(int nproc, const std::vector<std::string>& argv);

// This process's command line (from /proc/self/cmdline), argv[0] included.
std::vector<std::string> own_command_line();

}  // namespace diffnet

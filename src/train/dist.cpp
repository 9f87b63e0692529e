// c10d process groups for data-parallel training, the torchrun/Slurm environment, and the local launcher
// of `diffnet train --nproc N`.
#include "diffnet/dist.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#if defined(DIFFNET_HAVE_C10D)
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#if defined(DIFFNET_HAVE_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(DIFFNET_HAVE_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "diffnet/common.h"

namespace diffnet {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int lo, int hi) {
  const char* v = env(name);
  if (!v) throw Error(name, "not set");
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    throw Error(name, std::string("'") + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
  return static_cast<int>(x);
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

DistEnv read_dist_env() {
  DistEnv e;
  if (env("RANK") || env("WORLD_SIZE")) {
    e.source = "torchrun";
    e.world = env_int("WORLD_SIZE", 1, 1 << 20);
    e.rank = env_int("RANK", 0, e.world - 1);
    e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, 1 << 20) : e.rank;
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    const int world = env_int("SLURM_NTASKS", 1, 1 << 20);
    if (world == 1) return e;  // a one-task Slurm job is an ordinary run
    e.source = "slurm";
    e.world = world;
    e.rank = env_int("SLURM_PROCID", 0, e.world - 1);
    e.local_rank = env("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0, 1 << 20) : 0;
  } else {
    return e;
  }
  if (const char* addr = env("MASTER_ADDR")) {
    e.master_addr = addr;
  } else if (e.world > 1) {
    throw Error("MASTER_ADDR", "not set: the host name or address of rank 0 (torchrun sets it; under Slurm "
                               "export it, e.g. MASTER_ADDR=$(scontrol show hostnames | head -n 1))");
  }
  if (env("MASTER_PORT")) e.master_port = env_int("MASTER_PORT", 1, 65535);
  return e;
}

bool dist_backend_available(const std::string& backend) {
#if defined(DIFFNET_HAVE_C10D) && defined(DIFFNET_HAVE_GLOO)
  if (backend == "gloo") return true;
#endif
#if defined(DIFFNET_HAVE_C10D) && defined(DIFFNET_HAVE_NCCL)
  if (backend == "nccl") return true;
#endif
  return false;
}

#if defined(DIFFNET_HAVE_C10D)

struct DistGroup::Impl {
  int rank = 0, world = 1;
  std::string backend;
  // Where the backend's collectives work: the host for Gloo, this rank's GPU for NCCL. Tensors elsewhere
  // (CUDA tensors under Gloo; the step's loss normaliser and the resume position, CPU tensors, under NCCL)
  // travel through a copy there.
  at::Device comm_device = at::kCPU;
  at::Tensor staged(const at::Tensor& t) const { return t.device() == comm_device ? t.contiguous() : t.to(comm_device); }
  c10::intrusive_ptr<c10d::Store> store;
  // The backend's collectives, waited for (the group's type differs between LibTorch releases and backends).
  std::function<void(std::vector<at::Tensor>&)> allreduce, broadcast;
  std::function<void()> barrier;

  [[noreturn]] void fail(const std::string& what, const std::exception& e) const {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw Error("rank " + std::to_string(rank), "lost contact with the other ranks during " + what +
                                                    " (a rank died, hung or timed out): " + msg);
  }
  template <typename PG>
  void bind(c10::intrusive_ptr<PG> pg) {
    allreduce = [pg](std::vector<at::Tensor>& t) { pg->allreduce(t)->wait(); };
    broadcast = [pg](std::vector<at::Tensor>& t) {
      c10d::BroadcastOptions o;
      o.rootRank = 0;
      o.rootTensor = 0;
      pg->broadcast(t, o)->wait();
    };
    barrier = [pg] { pg->barrier()->wait(); };
  }
  template <typename F>
  void guarded(const std::string& what, F&& f) const {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(what, e);
    }
  }
};

DistGroup::DistGroup(const DistEnv& env_in, const std::string& backend_in, const std::string& device,
                     double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.rank = env_in.rank;
  im.world = env_in.world;
  const bool cuda = device.rfind("cuda", 0) == 0;
  im.backend = backend_in == "auto" ? (cuda ? "nccl" : "gloo") : backend_in;
  if (im.backend != "gloo" && im.backend != "nccl")
    throw Error("dist_backend", "'" + backend_in + "' is not one of auto, gloo, nccl");
  if (im.backend == "nccl" && !cuda) throw Error("dist_backend", "nccl reduces CUDA tensors: the device must be cuda");
  if (!(timeout_s > 0)) throw Error("dist_timeout", "must be positive");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  im.guarded("the rendezvous at " + env_in.master_addr + ":" + std::to_string(env_in.master_port), [&] {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env_in.master_port);
    so.isServer = im.rank == 0;
    so.numWorkers = static_cast<size_t>(im.world);
    so.waitWorkers = true;
    so.timeout = timeout;
    im.store = c10::make_intrusive<c10d::TCPStore>(env_in.master_addr, so);
    if (im.backend == "gloo") {
#if defined(DIFFNET_HAVE_GLOO)
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* ifname = env("GLOO_SOCKET_IFNAME"))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(env_in.master_addr))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      im.bind(c10::make_intrusive<c10d::ProcessGroupGloo>(im.store, im.rank, im.world, opts));
#else
      throw Error("dist_backend", "this build has no c10d Gloo process group (Debian: install libgloo-dev and rebuild; "
                                  "PyTorch's pip LibTorch lacks Gloo's headers: use --dist-backend nccl on CUDA)");
#endif
    } else {
#if defined(DIFFNET_HAVE_NCCL)
      im.comm_device = at::Device(device);
      if (!im.comm_device.has_index()) im.comm_device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env_in.local_rank));
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      im.bind(c10::make_intrusive<c10d::ProcessGroupNCCL>(im.store, im.rank, im.world, opts));
#else
      throw Error("dist_backend", "this build has no NCCL process group (a CUDA LibTorch with NCCL is needed)");
#endif
    }
  });
}

DistGroup::~DistGroup() = default;
int DistGroup::rank() const { return impl_->rank; }
int DistGroup::world() const { return impl_->world; }
const std::string& DistGroup::backend() const { return impl_->backend; }

void DistGroup::broadcast(std::vector<at::Tensor>& tensors, const std::string& what) {
  Impl& im = *impl_;
  im.guarded(what, [&] {
    for (auto& t : tensors) {  // one at a time: a broadcast list must share one shape in some backends
      std::vector<at::Tensor> one = {im.staged(t)};
      im.broadcast(one);
      if (!one[0].is_same(t)) t.copy_(one[0]);
    }
  });
}

void DistGroup::average(const std::vector<at::Tensor>& tensors, const std::string& what, int64_t bucket_bytes) {
  Impl& im = *impl_;
  // Buckets: consecutive tensors of one dtype and device, up to bucket_bytes each.
  std::vector<std::vector<at::Tensor>> buckets;
  int64_t bytes = 0;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    const int64_t nb = t.numel() * static_cast<int64_t>(t.element_size());
    bool fresh = buckets.empty() || bytes + nb > bucket_bytes || buckets.back().front().scalar_type() != t.scalar_type() ||
                 buckets.back().front().device() != t.device();
    if (fresh) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(t);
    bytes += nb;
  }
  im.guarded(what, [&] {
    for (auto& bucket : buckets) {
      std::vector<at::Tensor> flat_views;
      for (const auto& t : bucket) flat_views.push_back(t.reshape({-1}));
      at::Tensor flat = at::cat(flat_views);
      std::vector<at::Tensor> io = {im.staged(flat)};
      im.allreduce(io);
      if (!io[0].is_same(flat)) flat.copy_(io[0]);
      flat.div_(im.world);
      int64_t off = 0;
      for (auto& t : bucket) {
        t.copy_(flat.slice(0, off, off + t.numel()).view(t.sizes()));
        off += t.numel();
      }
    }
  });
}

void DistGroup::sum(at::Tensor& tensor, const std::string& what) {
  Impl& im = *impl_;
  im.guarded(what, [&] {
    std::vector<at::Tensor> io = {im.staged(tensor)};
    im.allreduce(io);
    if (!io[0].is_same(tensor)) tensor.copy_(io[0]);
  });
}

std::string DistGroup::share(const std::string& key, const std::string& value) {
  Impl& im = *impl_;
  std::string out = value;
  im.guarded("the exchange of " + key, [&] {
    const std::string k = "diffnet/" + key;
    if (im.rank == 0) {
      im.store->set(k, std::vector<uint8_t>(value.begin(), value.end()));
    } else {
      std::vector<uint8_t> v = im.store->get(k);
      out.assign(v.begin(), v.end());
    }
  });
  return out;
}

void DistGroup::barrier(const std::string& what) { impl_->guarded(what, [&] { impl_->barrier(); }); }

#else  // no c10d in this LibTorch

struct DistGroup::Impl {};
DistGroup::DistGroup(const DistEnv&, const std::string&, const std::string&, double) {
  throw Error("distributed training", "this build has no c10d (its TCPStore header did not compile with this LibTorch)");
}
DistGroup::~DistGroup() = default;
int DistGroup::rank() const { return 0; }
int DistGroup::world() const { return 1; }
const std::string& DistGroup::backend() const {
  static const std::string none;
  return none;
}
void DistGroup::broadcast(std::vector<at::Tensor>&, const std::string&) {}
void DistGroup::average(const std::vector<at::Tensor>&, const std::string&, int64_t) {}
void DistGroup::sum(at::Tensor&, const std::string&) {}
std::string DistGroup::share(const std::string&, const std::string& value) { return value; }
void DistGroup::barrier(const std::string&) {}

#endif

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  if (start < all.size()) args.push_back(all.substr(start));
  return args;
}

namespace {

// A free TCP port on the loopback interface (bound, read, released: the rendezvous takes it next).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("launcher", std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw Error("launcher", std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

struct Child {
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr pipes (read ends)
  std::string pending[2];
  bool running = true;
  int status = 0;
};

// Writes the complete lines of `buf` (\n or \r ended) with the rank prefix; keeps the rest.
void forward_lines(std::string& buf, int rank, FILE* to, bool flush_all) {
  size_t start = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] == '\n' || buf[i] == '\r') {
      if (i > start) std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(i - start), buf.data() + start);
      start = i + 1;
    }
  }
  if (flush_all && start < buf.size()) {
    std::fprintf(to, "[rank %d] %s\n", rank, buf.c_str() + start);
    start = buf.size();
  }
  buf.erase(0, start);
  std::fflush(to);
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int launch_local(int nproc, const std::vector<std::string>& argv) {
  if (nproc < 1) throw Error("launcher", "the number of processes must be at least 1");
  if (argv.empty()) throw Error("launcher", "no command to run");
  const int port = free_port();
  const int threads = std::max(1, usable_cores() / nproc);
  const bool set_threads = !env("DIFFNET_THREADS");
  std::fprintf(stderr, "launch: %d processes on 127.0.0.1:%d%s\n", nproc, port,
               set_threads ? (", " + std::to_string(threads) + " thread(s) each unless -t says otherwise").c_str() : "");

  // Everything the children need is built before fork (only async-signal-safe calls after it).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::vector<std::string>> envs(static_cast<size_t>(nproc));
  std::vector<std::vector<char*>> envps(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    auto& e = envs[static_cast<size_t>(r)];
    for (char** p = environ; *p; ++p) {
      std::string kv = *p;
      for (const char* drop : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT=",
                               "SLURM_PROCID=", "SLURM_NTASKS="})
        if (kv.rfind(drop, 0) == 0) kv.clear();
      if (!kv.empty()) e.push_back(kv);
    }
    e.push_back("RANK=" + std::to_string(r));
    e.push_back("LOCAL_RANK=" + std::to_string(r));
    e.push_back("WORLD_SIZE=" + std::to_string(nproc));
    e.push_back("MASTER_ADDR=127.0.0.1");
    e.push_back("MASTER_PORT=" + std::to_string(port));
    if (set_threads) e.push_back("DIFFNET_THREADS=" + std::to_string(threads));
    for (auto& kv : e) envps[static_cast<size_t>(r)].push_back(const_cast<char*>(kv.c_str()));
    envps[static_cast<size_t>(r)].push_back(nullptr);
  }
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw Error("launcher", "cannot find this program (/proc/self/exe)");
  exe[n] = '\0';

  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<Child> kids(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    Child& c = kids[static_cast<size_t>(r)];
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw Error("launcher", std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw Error("launcher", std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the launcher gone: stop too
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execve(exe, args.data(), envps[static_cast<size_t>(r)].data());
      _exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    c.pid = pid;
    c.fds[0] = out[0];
    c.fds[1] = err[0];
    std::fprintf(stderr, "launch: rank %d pid %d\n", r, static_cast<int>(pid));
  }

  int result = 0;
  bool stopping = false;
  double kill_at = 0;
  auto stop_all = [&](int sig) {
    for (auto& c : kids)
      if (c.running) ::kill(c.pid, sig);
  };
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<int, int>> owner;  // (rank, stream)
    for (int r = 0; r < nproc; ++r)
      for (int s = 0; s < 2; ++s)
        if (kids[static_cast<size_t>(r)].fds[s] >= 0) {
          pfds.push_back({kids[static_cast<size_t>(r)].fds[s], POLLIN, 0});
          owner.emplace_back(r, s);
        }
    bool any_running = std::any_of(kids.begin(), kids.end(), [](const Child& c) { return c.running; });
    if (pfds.empty() && !any_running) break;
    if (!pfds.empty()) ::poll(pfds.data(), pfds.size(), 200);
    else ::usleep(100000);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, s] = owner[i];
      Child& c = kids[static_cast<size_t>(r)];
      char buf[8192];
      ssize_t got = ::read(c.fds[s], buf, sizeof buf);
      if (got > 0) {
        c.pending[s].append(buf, static_cast<size_t>(got));
        forward_lines(c.pending[s], r, s == 0 ? stdout : stderr, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        forward_lines(c.pending[s], r, s == 0 ? stdout : stderr, true);
        ::close(c.fds[s]);
        c.fds[s] = -1;
      }
    }
    // Reap every rank that ended since the last pass, then name the cause: a rank killed by a signal
    // before one that exited with an error, since a rank that dies makes the others fail too (they lose
    // contact in the next collective) and both can be found dead in the same pass.
    std::vector<int> failed;
    for (int r = 0; r < nproc; ++r) {
      Child& c = kids[static_cast<size_t>(r)];
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.status = status;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failed.push_back(r);
    }
    if (!failed.empty() && !stopping) {
      auto signalled = std::find_if(failed.begin(), failed.end(),
                                    [&](int r) { return WIFSIGNALED(kids[static_cast<size_t>(r)].status); });
      const int cause = signalled != failed.end() ? *signalled : failed.front();
      auto say = [&](int r, const char* before, const char* after) {
        const Child& k = kids[static_cast<size_t>(r)];
        std::fprintf(stderr, "launch: rank %d (pid %d) %s%s%s\n", r, static_cast<int>(k.pid), before,
                     describe(k.status).c_str(), after);
      };
      say(cause, "", "; stopping the other ranks");
      for (int r : failed)
        if (r != cause) say(r, "also ", "");
      const Child& c = kids[static_cast<size_t>(cause)];
      result = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
      stopping = true;
      kill_at = now_seconds() + 10;
      stop_all(SIGTERM);
    }
    if (g_stop_signal && !stopping) {
      std::fprintf(stderr, "launch: signal %d: stopping all ranks\n", static_cast<int>(g_stop_signal));
      result = 128 + g_stop_signal;
      stopping = true;
      kill_at = now_seconds() + 10;
      stop_all(SIGTERM);
    }
    if (stopping && kill_at > 0 && now_seconds() > kill_at) {
      stop_all(SIGKILL);
      kill_at = 0;
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace diffnet

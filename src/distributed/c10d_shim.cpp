// A C interface to c10d, the C++ core of torch.distributed inside the libtorch a3g
// links: a TCPStore for the rendezvous and a ProcessGroupGloo that reduces CPU tensors
// between the ranks of a run, and, where built with USE_C10D_NCCL (the CUDA wheel),
// a ProcessGroupNCCL that sums the model on the ranks' GPUs instead. tch binds none
// of c10d, so this file is the one place a3g reaches it. Every function catches what
// c10d throws and hands back the first line of its message, so that a peer that is
// gone reaches Rust as an error rather than as an abort.

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/ATen.h>
#include <c10/util/Logging.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Collectives wait with no deadline of their own: the timeout given to Gloo's options
// bounds each of them, and fails it there, so no operation is left running (and
// writing into a caller's buffer) after its wait has returned.
struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef USE_C10D_NCCL
  // Set by a3g_c10d_sum_on_gpu: the model's sums then go through NCCL on `gpu`,
  // while the small exchanges (settings, counters, digests) stay on Gloo.
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
  at::Device gpu{at::kCPU};
#endif
};

// Copies the first line of `message` into `error` (of `capacity` bytes), ended by NUL,
// without allocating: it runs inside a catch handler, where a throw would abort.
void report(const char* message, char* error, size_t capacity) noexcept {
  if (error == nullptr || capacity == 0) {
    return;
  }
  size_t length = strnlen(message, capacity - 1);
  const void* line_end = std::memchr(message, '\n', length);
  if (line_end != nullptr) {
    length = static_cast<const char*>(line_end) - message;
  }
  std::memcpy(error, message, length);
  error[length] = '\0';
}

// The device Gloo's connections use: `bind_host` when given (a loopback run), else the
// interface GLOO_SOCKET_IFNAME names, as torch.distributed honours it, else the
// address this machine's hostname resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& bind_host) {
  if (!bind_host.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(bind_host);
  }
  const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME");
  if (interfaces != nullptr && interfaces[0] != '\0') {
    std::string first(interfaces);
    return c10d::ProcessGroupGloo::createDeviceForInterface(first.substr(0, first.find(',')));
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Where stderr was while a join silenced it, or -1.
std::atomic<int> silenced_stderr{-1};
// Set once a rank has given up on its join: a join thread that only then reaches
// silence_stderr (under a heavy load) must not hide the error the rank prints.
std::atomic<bool> stderr_given_back{false};

// Points stderr back where it was; once, whichever thread comes first.
void restore_stderr() {
  int saved = silenced_stderr.exchange(-1);
  if (saved >= 0) {
    dup2(saved, 2);
    close(saved);
  }
}

// Points stderr at /dev/null for the length of a join. Gloo prints its connection
// retries there unconditionally (its log level has no setting above ERROR, which they
// are), and c10d's log is quiet already: a3g's user reads one line a failure.
void silence_stderr() {
  int quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (quiet < 0 || saved < 0) {
    if (quiet >= 0) close(quiet);
    if (saved >= 0) close(saved);
    return;
  }
  if (stderr_given_back.load()) {
    close(quiet);
    close(saved);
    return;
  }
  dup2(quiet, 2);
  close(quiet);
  silenced_stderr.store(saved);
  if (stderr_given_back.load()) {
    restore_stderr();
  }
}

// A socket listening at host:port (an IPv4 or IPv6 literal), for the store of a run
// kept to loopback: TCPStore itself listens on every interface, which would open a
// loopback run's store to other machines.
int listen_at(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
  }
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_storage address{};
  socklen_t length;
  if (v6) {
    auto* ipv6 = reinterpret_cast<sockaddr_in6*>(&address);
    ipv6->sin6_family = AF_INET6;
    ipv6->sin6_port = htons(port);
    inet_pton(AF_INET6, host.c_str(), &ipv6->sin6_addr);
    length = sizeof(sockaddr_in6);
  } else {
    auto* ipv4 = reinterpret_cast<sockaddr_in*>(&address);
    ipv4->sin_family = AF_INET;
    ipv4->sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &ipv4->sin_addr);
    length = sizeof(sockaddr_in);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, SOMAXCONN) != 0) {
    int reason = errno;
    close(fd);
    throw std::runtime_error("the store cannot listen at " + host + ":" + std::to_string(port) +
                             " (" + std::strerror(reason) +
                             "): another run or service holds the port; pick a free MASTER_PORT");
  }
  return fd;
}

// Runs `body`, turning anything it throws into a message and -1.
template <typename Body>
int guarded(char* error, size_t capacity, Body body) {
  try {
    body();
    return 0;
  } catch (const std::exception& exception) {
    report(exception.what(), error, capacity);
  } catch (...) {
    report("an exception of unknown type", error, capacity);
  }
  return -1;
}

}  // namespace

extern "C" {

// How far a join got, for the message when it does not finish in time: the rank
// reads it (a Rust AtomicI32, hence the atomic builtins) from another thread once
// its timeout has passed.
enum JoinPhase : int32_t {
  kReachingStore = 0,
  kMeetingRanks = 1,
  kJoined = 2,
};

// Joins the group of `world_size` ranks whose store listens at host:port (rank 0
// serves it unless `serve_store` is 0, as under torchrun, whose agent serves it).
// Gloo's own connections bind to `bind_host` when it is not empty (a loopback run
// keeps to 127.0.0.1), else to the address this machine's hostname resolves to.
// Returns null with `error` filled when c10d gives up. Some waits of c10d's have no
// deadline (a store client waits for ever on a listener that accepts and never
// answers), so the caller bounds the whole join and reads `phase` to say where it
// stuck.
void* a3g_c10d_join(const char* host, uint16_t port, int rank, int world_size,
                    int serve_store, int64_t timeout_ms, const char* bind_host,
                    int32_t* phase, char* error, size_t capacity) {
  Group* joined = nullptr;
  guarded(error, capacity, [&] {
    // c10's log, and c10d's through it, prints exception texts with stack frames on
    // stderr, where a3g's user reads one line a failure: quiet unless PyTorch's own
    // TORCH_CPP_LOG_LEVEL asks for it.
    if (std::getenv("TORCH_CPP_LOG_LEVEL") != nullptr) {
      c10::initLogging();
    } else {
      FLAGS_caffe2_log_level = 3;  // fatal only
      silence_stderr();
    }
    struct Restore {
      ~Restore() { restore_stderr(); }
    } restore;
    std::string loopback = bind_host == nullptr ? "" : bind_host;
#ifdef USE_C10D_NCCL
    // A blocking wait makes an NCCL reduction that outlives its timeout throw in
    // wait(), and so reach Rust as one line, instead of NCCL's watchdog ending the
    // process. Set here, before c10d starts threads that may read the environment.
    setenv("TORCH_NCCL_BLOCKING_WAIT", "1", 1);
#endif
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions options;
    options.port = port;
    options.isServer = serve_store != 0;
    options.numWorkers = world_size;
    // Gloo's set-up below waits for every rank anyway, and a wait here would hide
    // whether the store answered at all.
    options.waitWorkers = false;
    options.timeout = timeout;
    if (options.isServer && !loopback.empty()) {
      options.masterListenFd = listen_at(loopback, port);
    }
    auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), options);
    __atomic_store_n(phase, kMeetingRanks, __ATOMIC_RELEASE);
    // A prefix of its own keeps a3g's keys apart from a launcher's in a shared store,
    // and apart from an earlier attempt's when torchrun restarts the ranks.
    const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
    std::string prefix = std::string("a3g/") + (restart == nullptr ? "0" : restart);
    auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
    // A rank of another run on the same port (a second world started on a running
    // one's MASTER_PORT, or two ranks given one RANK) would take part in Gloo's
    // set-up of a world that is not its own and fail there only after the timeout.
    std::string address = std::string(host) + ":" + std::to_string(port);
    if (store->add("claims/rank" + std::to_string(rank), 1) > 1) {
      throw std::runtime_error(
          "rank " + std::to_string(rank) + " has already joined the world whose store is at " +
          address + ": another run uses that port, two ranks were given the same rank, or this " +
          "rank was restarted while the others were still meeting (restart them all)");
    }
    // Every rank must agree on the world's size, or Gloo's set-up can complete for
    // some ranks and not others, who then fail only at the first exchange.
    std::string own_size = std::to_string(world_size);
    if (rank == 0) {
      store->set("world_size", std::vector<uint8_t>(own_size.begin(), own_size.end()));
    } else {
      auto value = store->get("world_size");
      std::string rank_zero_size(value.begin(), value.end());
      if (rank_zero_size != own_size) {
        throw std::runtime_error("this rank's WORLD_SIZE is " + own_size + " and rank 0's at " +
                                 address + " is " + rank_zero_size +
                                 ": start every rank with the same WORLD_SIZE (or another run " +
                                 "uses that port)");
      }
    }
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_options->devices.push_back(gloo_device(loopback));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size,
                                                            gloo_options);
    joined = new Group{store, gloo};
    __atomic_store_n(phase, kJoined, __ATOMIC_RELEASE);
  });
  return joined;
}

// Points stderr back where it was before a join silenced it: called by a rank whose
// join outlived its timeout, before it reports so.
void a3g_c10d_restore_stderr() {
  stderr_given_back.store(true);
  restore_stderr();
}

void a3g_c10d_leave(void* group) {
  auto* joined = static_cast<Group*>(group);
#ifdef USE_C10D_NCCL
  // Without it, NCCL's destructor warns at length that the group was not shut down.
  if (joined->nccl) {
    try {
      joined->nccl->shutdown();
    } catch (...) {
    }
  }
#endif
  delete joined;
}

// From now on, sums the model's changes through NCCL on CUDA device `device`, every
// rank having called this with its own device. NCCL's set-up blocks with no timeout
// of its own, so a rank that failed before reaching it would leave the others there
// for good: every rank first puts a tensor on its GPU and says over Gloo whether it
// could, and only then do they build NCCL's group, whose first all-reduce is run
// here so that a communicator NCCL cannot build fails at the start, not mid-run.
int a3g_c10d_sum_on_gpu(void* group, int device, int64_t timeout_ms, char* error,
                        size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
#ifdef USE_C10D_NCCL
    at::Device gpu(at::kCUDA, static_cast<c10::DeviceIndex>(device));
    std::string own_failure;
    at::Tensor probe;
    try {
      probe = at::ones({1}, at::TensorOptions().device(gpu));
    } catch (const std::exception& exception) {
      own_failure = exception.what();
    }
    std::vector<at::Tensor> failures{at::full({1}, own_failure.empty() ? 0 : 1, at::kInt)};
    joined->gloo->allreduce(failures)->wait();
    if (!own_failure.empty()) {
      throw std::runtime_error(own_failure);
    }
    if (failures[0].item<int>() > 0) {
      throw std::runtime_error("another rank could not put a tensor on its GPU for NCCL");
    }
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = std::chrono::milliseconds(timeout_ms);
    auto store = c10::make_intrusive<c10d::PrefixStore>("nccl", joined->store);
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        store, joined->gloo->getRank(), joined->gloo->getSize(), options);
    std::vector<at::Tensor> probes{probe};
    try {
      nccl->allreduce(probes)->wait();
    } catch (...) {
      try {
        nccl->abort();
      } catch (...) {
      }
      throw;
    }
    joined->nccl = nccl;
    joined->gpu = gpu;
#else
    (void)joined;
    (void)device;
    (void)timeout_ms;
    throw std::runtime_error("this a3g was built without NCCL");
#endif
  });
}

// The 16 bytes of CUDA device `device`'s UUID into `uuid`, which name the GPU itself
// whatever devices a process is shown (CUDA_VISIBLE_DEVICES, a container's
// NVIDIA_VISIBLE_DEVICES), so that ranks can tell whether two of them hold one GPU,
// which NCCL refuses. 1 on success; 0 without NCCL, or if CUDA cannot say.
int a3g_cuda_uuid(int device, unsigned char* uuid) {
#ifdef USE_C10D_NCCL
  try {
    const cudaDeviceProp* properties =
        at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
    std::memcpy(uuid, properties->uuid.bytes, 16);
    return 1;
  } catch (...) {
    return 0;
  }
#else
  (void)device;
  (void)uuid;
  return 0;
#endif
}

// Sums `length` floats at `values` over the ranks, in place: through NCCL on this
// rank's GPU once a3g_c10d_sum_on_gpu succeeded, else through Gloo.
int a3g_c10d_all_reduce_sum(void* group, float* values, int64_t length, char* error,
                            size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
    at::Tensor host = at::from_blob(values, {length}, at::kFloat);
#ifdef USE_C10D_NCCL
    if (joined->nccl) {
      std::vector<at::Tensor> tensors{host.to(joined->gpu)};
      joined->nccl->allreduce(tensors)->wait();
      host.copy_(tensors[0]);
      return;
    }
#endif
    std::vector<at::Tensor> tensors{host};
    joined->gloo->allreduce(tensors)->wait();
  });
}

// Gives every rank rank `root`'s `length` bytes at `bytes`, in place.
int a3g_c10d_broadcast(void* group, uint8_t* bytes, int64_t length, int root,
                       char* error, size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
    std::vector<at::Tensor> tensors{at::from_blob(bytes, {length}, at::kByte)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    joined->gloo->broadcast(tensors, options)->wait();
  });
}

// Gathers every rank's `value` into `gathered`, which holds one per rank, by rank.
int a3g_c10d_all_gather(void* group, const int64_t* values, size_t count, int64_t* gathered,
                        char* error, size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
    int world_size = joined->gloo->getSize();
    auto length = static_cast<int64_t>(count);
    std::vector<at::Tensor> input{at::empty({length}, at::kLong)};
    std::copy(values, values + count, input[0].data_ptr<int64_t>());
    std::vector<std::vector<at::Tensor>> output(1);
    for (int rank = 0; rank < world_size; ++rank) {
      output[0].push_back(at::empty({length}, at::kLong));
    }
    joined->gloo->allgather(output, input)->wait();
    for (int rank = 0; rank < world_size; ++rank) {
      const int64_t* received = output[0][rank].data_ptr<int64_t>();
      std::copy(received, received + count, gathered + rank * count);
    }
  });
}

}  // extern "C"

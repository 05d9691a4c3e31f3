// A C interface to c10d, the C++ core of torch.distributed inside the libtorch a3g
// links: a TCPStore for the rendezvous and a ProcessGroupGloo that reduces CPU tensors
// between the ranks of a run. tch binds none of c10d, so this file is the one place
// a3g reaches it. Every function catches what c10d throws and hands back the first
// line of its message, so that a peer that is gone reaches Rust as an error rather
// than as an abort.

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::chrono::milliseconds timeout;
};

// Copies the first line of `message` into `error` (of `capacity` bytes), ended by NUL.
void report(const char* message, char* error, size_t capacity) {
  if (error == nullptr || capacity == 0) {
    return;
  }
  std::string text(message);
  auto line_end = text.find('\n');
  if (line_end != std::string::npos) {
    text.resize(line_end);
  }
  size_t length = std::min(text.size(), capacity - 1);
  std::memcpy(error, text.data(), length);
  error[length] = '\0';
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

// Joins the group of `world_size` ranks whose store listens at host:port (rank 0
// serves it unless `serve_store` is 0, as under torchrun, whose agent serves it).
// Gloo's own connections bind to `bind_host` when it is not empty (a loopback run
// keeps to 127.0.0.1), else to the address this machine's hostname resolves to.
// Returns null with `error` filled when the peers do not all arrive in time.
void* a3g_c10d_join(const char* host, uint16_t port, int rank, int world_size,
                    int serve_store, int64_t timeout_ms, const char* bind_host,
                    char* error, size_t capacity) {
  Group* joined = nullptr;
  guarded(error, capacity, [&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions options;
    options.port = port;
    options.isServer = serve_store != 0;
    options.numWorkers = world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), options);
    // A prefix of its own keeps a3g's keys apart from a launcher's in a shared store.
    auto store = c10::make_intrusive<c10d::PrefixStore>("a3g", tcp);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    std::string bind(bind_host == nullptr ? "" : bind_host);
    gloo_options->devices.push_back(
        bind.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                     : c10d::ProcessGroupGloo::createDeviceForHostname(bind));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size,
                                                            gloo_options);
    joined = new Group{store, gloo, timeout};
  });
  return joined;
}

void a3g_c10d_leave(void* group) { delete static_cast<Group*>(group); }

// Sums `length` floats at `values` over the ranks, in place.
int a3g_c10d_all_reduce_sum(void* group, float* values, int64_t length, char* error,
                            size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
    std::vector<at::Tensor> tensors{at::from_blob(values, {length}, at::kFloat)};
    joined->gloo->allreduce(tensors)->wait(joined->timeout);
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
    joined->gloo->broadcast(tensors, options)->wait(joined->timeout);
  });
}

// Gathers every rank's `value` into `gathered`, which holds one per rank, by rank.
int a3g_c10d_all_gather(void* group, int64_t value, int64_t* gathered, char* error,
                        size_t capacity) {
  auto* joined = static_cast<Group*>(group);
  return guarded(error, capacity, [&] {
    int world_size = joined->gloo->getSize();
    std::vector<at::Tensor> input{at::full({1}, value, at::kLong)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int rank = 0; rank < world_size; ++rank) {
      output[0].push_back(at::empty({1}, at::kLong));
    }
    joined->gloo->allgather(output, input)->wait(joined->timeout);
    for (int rank = 0; rank < world_size; ++rank) {
      gathered[rank] = output[0][rank].item<int64_t>();
    }
  });
}

}  // extern "C"

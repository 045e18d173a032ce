// Which UCX transports carry ucp_get_nbx between two processes on this machine, by where the
// source memory comes from and the endpoint's error handling: the question behind the KV data
// plane's transport (kv_transfer_agent.h). The child maps `--bytes` of memory either as the KV
// cache does (an anonymous mmap, registered with ucp_mem_map) or allocated by UCX itself
// (ucp_mem_map with UCP_MEM_MAP_ALLOCATE, which the shared-memory transports can attach), and
// sends its address, rkey and worker address through a pipe; the parent reads it in `--piece`
// gets plus a flush, `--iters` times, over an endpoint with UCP_ERR_HANDLING_MODE_PEER or NONE,
// prints the endpoint's lanes (ucp_ep_print_info) and the best MB/s.
//
//   ucx_lane_probe --memory mmap|ucx --err-mode peer|none [--bytes 37748736] [--piece 73728] [--iters 12]
//
// UCX_TLS in the environment narrows the transports, as for the workers.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool send_blob(int fd, const void* data, uint64_t n) {
  return write(fd, &n, sizeof n) == ssize_t(sizeof n) && write(fd, data, n) == ssize_t(n);
}

bool receive_blob(int fd, std::string& out) {
  uint64_t n = 0;
  if (read(fd, &n, sizeof n) != ssize_t(sizeof n) || n > (1u << 20)) return false;
  out.resize(n);
  for (size_t got = 0; got < n;) {
    const ssize_t r = read(fd, out.data() + got, n - got);
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

bool start_ucx(ucp_context_h* context, ucp_worker_h* worker) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;  // as KvTransferAgent asks
  const ucs_status_t s = ucp_init(&params, config, context);
  ucp_config_release(config);
  if (s != UCS_OK) return false;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  return ucp_worker_create(*context, &wp, worker) == UCS_OK;
}

int fail(const char* what) {
  std::fprintf(stderr, "ucx_lane_probe: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string memory = "mmap", err_mode = "peer";
  size_t bytes = size_t(512) * 73728, piece = 73728;
  int iters = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--memory" && (v == "mmap" || v == "ucx")) memory = v;
    else if (a == "--err-mode" && (v == "peer" || v == "none")) err_mode = v;
    else if (a == "--bytes") bytes = size_t(std::atoll(v.c_str()));
    else if (a == "--piece") piece = size_t(std::atoll(v.c_str()));
    else if (a == "--iters") iters = std::atoi(v.c_str());
    else return std::fprintf(stderr, "unknown option or value: %s %s\n", a.c_str(), v.c_str()), 2;
  }
  if (piece == 0 || bytes < piece || iters < 3) return fail("need --bytes >= --piece > 0 and --iters >= 3");
  const size_t n_pieces = bytes / piece;
  bytes = n_pieces * piece;

  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return fail("pipe");
  const pid_t child = fork();
  if (child == 0) {  // the source: registered (or UCX-allocated) memory, progressed until told to stop
    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    if (!start_ucx(&context, &worker)) return fail("child: UCX did not start");
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.length = bytes;
    if (memory == "ucx") {
      mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
      mp.flags = UCP_MEM_MAP_ALLOCATE;
    } else {
      mp.address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mp.address == MAP_FAILED) return fail("child: mmap");
    }
    ucp_mem_h memh = nullptr;
    if (ucp_mem_map(context, &mp, &memh) != UCS_OK) return fail("child: ucp_mem_map");
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if (ucp_mem_query(memh, &attr) != UCS_OK) return fail("child: ucp_mem_query");
    std::memset(attr.address, 0x5a, bytes);
    void* rkey = nullptr;
    size_t rkey_size = 0;
    ucp_address_t* address = nullptr;
    size_t address_size = 0;
    if (ucp_rkey_pack(context, memh, &rkey, &rkey_size) != UCS_OK) return fail("child: ucp_rkey_pack");
    if (ucp_worker_get_address(worker, &address, &address_size) != UCS_OK) return fail("child: address");
    const uint64_t base = uint64_t(reinterpret_cast<uintptr_t>(attr.address));
    send_blob(to_parent[1], &base, sizeof base);
    send_blob(to_parent[1], rkey, rkey_size);
    send_blob(to_parent[1], address, address_size);
    fcntl(to_child[0], F_SETFL, O_NONBLOCK);
    char done = 0;
    while (read(to_child[0], &done, 1) != 1) ucp_worker_progress(worker);  // software RMA needs the target
    return 0;
  }

  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  if (!start_ucx(&context, &worker)) return fail("UCX did not start");
  std::string base_blob, rkey_blob, address_blob;
  if (!receive_blob(to_parent[0], base_blob) || !receive_blob(to_parent[0], rkey_blob) ||
      !receive_blob(to_parent[0], address_blob) || base_blob.size() != sizeof(uint64_t))
    return fail("the child's address did not arrive");
  uint64_t base = 0;
  std::memcpy(&base, base_blob.data(), sizeof base);
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(address_blob.data());
  ep_params.err_mode = err_mode == "peer" ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h ep = nullptr;
  if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) return fail("ucp_ep_create");
  ucp_rkey_h rkey = nullptr;
  if (ucp_ep_rkey_unpack(ep, rkey_blob.data(), &rkey) != UCS_OK) return fail("ucp_ep_rkey_unpack");
  std::vector<uint8_t> local(bytes, 0);

  double best = 0;
  for (int it = 0; it < iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    ucp_request_param_t param{};
    std::vector<void*> pending;
    for (size_t i = 0; i < n_pieces; ++i) {
      ucs_status_ptr_t r = ucp_get_nbx(ep, local.data() + i * piece, piece, base + i * piece, rkey, &param);
      if (UCS_PTR_IS_ERR(r)) return fail(ucs_status_string(UCS_PTR_STATUS(r)));
      if (r != nullptr) pending.push_back(r);
    }
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(flush)) return fail("flush");
    if (flush != nullptr) pending.push_back(flush);
    for (void* r : pending) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
      if (ucp_request_check_status(r) != UCS_OK) return fail("a get failed");
      ucp_request_free(r);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (it >= 2) best = std::max(best, double(bytes) / s / 1e6);  // the first two warm up
  }
  if (local.front() != 0x5a || local.back() != 0x5a) return fail("the bytes did not arrive");
  std::printf("memory %s, err_mode %s, %zu B in %zu gets: best %.0f MB/s over %d reads\n", memory.c_str(),
              err_mode.c_str(), bytes, n_pieces, best, iters - 2);
  ucp_ep_print_info(ep, stdout);
  ucp_rkey_destroy(rkey);
  (void)write(to_child[1], "x", 1);
  waitpid(child, nullptr, 0);
  return 0;
}

#include "dist/ep/ep_runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace deepinfer {
namespace {

// The number of processes mpirun started (its environment), or 0 when it did not start this one.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

}  // namespace

Result<std::unique_ptr<EpRuntime>> EpRuntime::start(int expert_parallel, double timeout_seconds) {
  const std::string flag = "--expert-parallel " + std::to_string(expert_parallel);
  if (expert_parallel < 1) return Status::Error(flag + ": must be at least 1");
  if (!(timeout_seconds > 0)) return Status::Error("--ep-timeout: must be positive");
  const int world = launcher_world_size();
  if (world <= 1 && expert_parallel == 1) return std::unique_ptr<EpRuntime>();
  if (world == 0)
    return Status::Error(flag + ": start " + std::to_string(expert_parallel) + " processes with mpirun -np " +
                         std::to_string(expert_parallel) + " (this one was not started by mpirun)");
  if (world != expert_parallel)
    return Status::Error(flag + ": must equal the number of MPI processes, which is " + std::to_string(world));
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      return Status::Error(flag + ": MPI did not start");
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return Status::Error(flag + ": this MPI cannot be called from more than one thread (MPI_THREAD_SERIALIZED)");
    }
  }
  std::unique_ptr<EpRuntime> rt(new EpRuntime());
  rt->group_ = std::make_unique<MpiGroup>(timeout_seconds);
  if (rt->group_->size() != expert_parallel)
    return Status::Error(flag + ": must equal the number of MPI processes, which is " +
                         std::to_string(rt->group_->size()));
  return rt;
}

std::string EpRuntime::summary() const {
  std::string rss = "?", hwm = "?";
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    const auto value = [&] { return line.substr(line.find_first_not_of(" \t", 6)); };
    if (line.rfind("VmRSS:", 0) == 0) rss = value();
    if (line.rfind("VmHWM:", 0) == 0) hwm = value();
  }
  const ExchangeStats s = group_->stats();  // copied under the group's lock
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "rank %d/%d: VmRSS %s (peak %s); %llu expert exchanges (+%llu count exchanges), %.3f MB sent to "
                "other ranks, %.3f MB kept, %.3f s in exchanges; %llu step agreements",
                rank(), size(), rss.c_str(), hwm.c_str(), static_cast<unsigned long long>(s.n_exchanges),
                static_cast<unsigned long long>(s.n_counts), double(s.bytes_sent) / 1e6, double(s.bytes_to_self) / 1e6,
                s.seconds_exchanging, static_cast<unsigned long long>(s.n_agreements));
  std::string out = buf;
  const ExpertLoad::Snapshot load = load_.snapshot();
  out += "; expert rows computed here per period between rebalances:";
  for (const int64_t rows : load.computed_per_period) out += " " + std::to_string(rows);
  return out;
}

EpRuntime::~EpRuntime() {
  const bool healthy = group_->health().ok();
  group_.reset();
  if (healthy) MPI_Finalize();
}

}  // namespace deepinfer

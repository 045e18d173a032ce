#include "dist/ep/mpi_group.h"

#include <chrono>
#include <climits>
#include <thread>

#include "core/check.h"

namespace deepinfer {
namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, size_t(len));
}

// Byte counts and displacements as MPI's ints; false when one does not fit.
bool to_int_layout(std::span<const int64_t> bytes, std::vector<int>& counts, std::vector<int>& displs) {
  counts.resize(bytes.size());
  displs.resize(bytes.size());
  int64_t at = 0;
  for (size_t r = 0; r < bytes.size(); ++r) {
    if (bytes[r] < 0 || bytes[r] > INT_MAX || at > INT_MAX) return false;
    counts[r] = int(bytes[r]);
    displs[r] = int(at);
    at += bytes[r];
  }
  return true;
}

}  // namespace

MpiGroup::MpiGroup(double timeout_seconds) : timeout_seconds_(timeout_seconds) {
  DI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_) == MPI_SUCCESS);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiGroup::~MpiGroup() {
  // A failed group may hold abandoned collectives: freeing its communicator could wait on them.
  if (health().ok()) MPI_Comm_free(&comm_);
}

Status MpiGroup::health() const {
  std::lock_guard lock(mu_);
  return failure_;
}

void MpiGroup::fail(Status why) {
  DI_CHECK(!why.ok());
  std::lock_guard lock(mu_);
  if (failure_.ok()) failure_ = std::move(why);
}

Status MpiGroup::check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  Status s = Status::Error("rank " + std::to_string(rank_) + ": " + what + " failed: " + mpi_error_text(rc));
  fail(s);
  return s;
}

Status MpiGroup::wait(MPI_Request& request, const char* what) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  for (;;) {
    int done = 0;
    DI_RETURN_IF_ERROR(check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::Ok();
    const auto now = Clock::now();
    if (now > deadline) {
      Status s = Status::Error("rank " + std::to_string(rank_) + ": the expert-parallel group did not complete " + what +
                               " within " + std::to_string(int(timeout_seconds_)) +
                               " s (a rank stopped answering or died)");
      fail(s);
      return s;
    }
    // Other ranks may share these cores: give them the CPU, and sleep once the wait is not short.
    if (now - start < std::chrono::microseconds(200)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status MpiGroup::exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) {
  DI_RETURN_IF_ERROR(health());
  DI_CHECK(send.size() == size_t(size_) && recv.size() == size_t(size_));
  const auto start = Clock::now();
  MPI_Request request;
  DI_RETURN_IF_ERROR(check(MPI_Ialltoall(send.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm_, &request),
                           "the count exchange"));
  Status s = wait(request, "a count exchange");
  std::lock_guard lock(mu_);
  ++stats_.n_counts;
  stats_.seconds_exchanging += std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

Status MpiGroup::exchange_start(std::span<const uint8_t> send, std::span<const int64_t> send_bytes,
                                std::span<uint8_t> recv, std::span<const int64_t> recv_bytes) {
  DI_RETURN_IF_ERROR(health());
  DI_CHECK(pending_ == MPI_REQUEST_NULL);
  DI_CHECK(send_bytes.size() == size_t(size_) && recv_bytes.size() == size_t(size_));
  if (!to_int_layout(send_bytes, send_counts_, send_displs_) || !to_int_layout(recv_bytes, recv_counts_, recv_displs_)) {
    Status s = Status::Error("rank " + std::to_string(rank_) + ": an expert exchange of 2 GiB or more per step");
    fail(s);
    return s;
  }
  DI_CHECK(int64_t(send.size()) >= int64_t(send_displs_.back()) + send_counts_.back());
  DI_CHECK(int64_t(recv.size()) >= int64_t(recv_displs_.back()) + recv_counts_.back());
  const auto start = Clock::now();
  DI_RETURN_IF_ERROR(check(MPI_Ialltoallv(send.data(), send_counts_.data(), send_displs_.data(), MPI_BYTE, recv.data(),
                                          recv_counts_.data(), recv_displs_.data(), MPI_BYTE, comm_, &pending_),
                           "the expert exchange"));
  pending_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status MpiGroup::exchange_finish() {
  DI_RETURN_IF_ERROR(health());
  DI_CHECK(pending_ != MPI_REQUEST_NULL);
  const auto start = Clock::now();
  Status s = wait(pending_, "an expert exchange");  // MPI_Test sets it to MPI_REQUEST_NULL once done
  if (!s.ok()) return s;
  std::lock_guard lock(mu_);
  ++stats_.n_exchanges;
  for (int r = 0; r < size_; ++r) (r == rank_ ? stats_.bytes_to_self : stats_.bytes_sent) += uint64_t(send_counts_[size_t(r)]);
  stats_.seconds_exchanging += pending_seconds_ + std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

Result<StepGroup::Agreement> MpiGroup::agree(bool has_work, bool stopping) {
  DI_RETURN_IF_ERROR(health());
  const int mine[2] = {has_work ? 1 : 0, stopping ? 0 : 1};
  int all[2] = {0, 0};
  MPI_Request request;
  DI_RETURN_IF_ERROR(check(MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MAX, comm_, &request), "the step agreement"));
  DI_RETURN_IF_ERROR(wait(request, "a step agreement"));
  std::lock_guard lock(mu_);
  ++stats_.n_agreements;
  return Agreement{all[0] != 0, all[1] == 0};
}

Result<std::vector<std::string>> MpiGroup::gather_to_root(const std::string& mine) {
  DI_RETURN_IF_ERROR(health());
  if (mine.size() > size_t(INT_MAX)) return Status::Error("gather: a string of 2 GiB or more");
  const int n = int(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  MPI_Request request;
  DI_RETURN_IF_ERROR(check(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_, &request), "a gather"));
  DI_RETURN_IF_ERROR(wait(request, "a gather"));
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[size_t(r)] = int(total);
    total += counts[size_t(r)];
  }
  if (total > INT_MAX) return Status::Error("gather: 2 GiB or more in all");
  std::string all(size_t(rank_ == 0 ? total : 0), '\0');
  DI_RETURN_IF_ERROR(check(MPI_Igatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, 0,
                                        comm_, &request),
                           "a gather"));
  DI_RETURN_IF_ERROR(wait(request, "a gather"));
  std::vector<std::string> out;
  if (rank_ == 0)
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(displs[size_t(r)]), size_t(counts[size_t(r)])));
  return out;
}

}  // namespace deepinfer

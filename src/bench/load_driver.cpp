#include "bench/load_driver.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <numeric>
#include <thread>
#include <unistd.h>

namespace deepinfer::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// A conversation in progress; shared by the callbacks of its current turn.
struct Active {
  int64_t index = 0;
  int64_t turn = 0;
  std::unique_ptr<Conversation> conversation;
};

class LoadDriver {
 public:
  LoadDriver(const Workload& workload, const ApiOptions& api, const Endpoint& endpoint, const LoadOptions& options)
      : workload_(workload), api_(api), options_(options), arrival_rng_(Rng::Derive(options.seed, 0x617272)) {
    for (int i = 0; i < options.n_threads; ++i) {
      contexts_.push_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(contexts_.back()->get_executor());
      clients_.push_back(std::make_unique<HttpClient>(*contexts_.back(), endpoint));
    }
    progress_timer_.emplace(*contexts_[0]);
    metrics_timer_.emplace(*contexts_[0]);
    arrival_timer_.emplace(*contexts_[0]);
  }

  LoadResult run() {
    std::vector<std::thread> threads;
    for (size_t i = 1; i < contexts_.size(); ++i) threads.emplace_back([this, i] { contexts_[i]->run(); });
    asio::post(*contexts_[0], [this] {
      if (options_.scrape_metrics) {
        scrape([this] { begin(); });
      } else {
        begin();
      }
    });
    contexts_[0]->run();
    for (auto& t : threads) t.join();
    return std::move(result_);
  }

 private:
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  void begin() {
    t0_ = Clock::now();
    if (options_.show_progress) tick_progress();
    if (options_.scrape_metrics && result_.metrics_error.empty()) tick_metrics();
    const int64_t n = workload_.n_conversations();
    switch (options_.mode) {
      case LoadOptions::Mode::kConcurrency:
        for (int64_t u = 0; u < std::min(options_.concurrency, n); ++u) start_conversation(next_index_++);
        break;
      case LoadOptions::Mode::kRate:
        arrive_next(0.0);
        break;
      case LoadOptions::Mode::kTrace:
        trace_order_.resize(static_cast<size_t>(n));
        std::iota(trace_order_.begin(), trace_order_.end(), 0);
        std::stable_sort(trace_order_.begin(), trace_order_.end(),
                         [&](int64_t a, int64_t b) { return *workload_.arrival_s(a) < *workload_.arrival_s(b); });
        arrive_next(0.0);
        break;
    }
    maybe_end();
  }

  // Open-loop arrivals (rate and trace mode): starts the next conversation at its time.
  void arrive_next(double t_s) {
    if (next_index_ >= workload_.n_conversations()) return;
    if (options_.mode == LoadOptions::Mode::kTrace) {
      t_s = *workload_.arrival_s(trace_order_[static_cast<size_t>(next_index_)]);
    }
    arrival_timer_->expires_at(t0_ + seconds(t_s));
    arrival_timer_->async_wait([this, t_s](boost::system::error_code ec) {
      if (ec) return;
      const int64_t i = next_index_++;
      start_conversation(options_.mode == LoadOptions::Mode::kTrace ? trace_order_[static_cast<size_t>(i)] : i);
      const double gap = options_.poisson ? arrival_rng_.exponential(1.0 / options_.rate) : 1.0 / options_.rate;
      arrive_next(t_s + gap);
    });
  }

  void start_conversation(int64_t index) {
    auto active = std::make_shared<Active>();
    active->index = index;
    active->conversation = workload_.conversation(index);
    send_next_turn(std::move(active));
  }

  void send_next_turn(std::shared_ptr<Active> active) {
    std::optional<TurnRequest> turn = active->conversation->next_turn();
    if (!turn) return conversation_done();
    if (options_.mode != LoadOptions::Mode::kConcurrency && options_.max_concurrency > 0 &&
        in_flight_ >= options_.max_concurrency) {
      queued_.emplace_back(std::move(active), std::move(*turn));
      return;
    }
    dispatch(std::move(active), std::move(*turn));
  }

  void conversation_done() {
    ++n_conversations_done_;
    if (options_.mode == LoadOptions::Mode::kConcurrency && next_index_ < workload_.n_conversations()) {
      start_conversation(next_index_++);
    }
    maybe_end();
  }

  // Sends a turn from a client thread; its record comes back to on_complete on the driver thread.
  void dispatch(std::shared_ptr<Active> active, TurnRequest turn) {
    ++in_flight_;
    const size_t k = next_client_++ % clients_.size();
    asio::post(*contexts_[k], [this, k, active = std::move(active), turn = std::move(turn)]() mutable {
      auto record = std::make_shared<RequestRecord>();
      auto reader = std::make_shared<StreamReader>();
      record->conversation = active->index;
      record->turn = active->turn;
      const int64_t n_tokens_in = turn.n_tokens_in;
      const double think_time_s = turn.think_time_s;
      std::string body = make_request_body(turn, api_);
      const Clock::time_point sent = Clock::now();
      record->t_sent_s = std::chrono::duration<double>(sent - t0_).count();
      clients_[k]->request(
          api_.path(), std::move(body), options_.request_timeout_s,
          [reader, sent](std::string_view bytes) {
            reader->on_body(bytes, std::chrono::duration<double>(Clock::now() - sent).count());
          },
          [this, record, reader, sent, n_tokens_in, think_time_s, active](const HttpResult& http) {
            record->e2e_s = std::chrono::duration<double>(Clock::now() - sent).count();
            record->error = http.error;
            record->error_detail = http.detail;
            reader->finish(*record, n_tokens_in);
            asio::post(*contexts_[0], [this, record, think_time_s, active] {
              on_complete(std::move(*record), think_time_s, active);
            });
          });
    });
  }

  void on_complete(RequestRecord record, double think_time_s, std::shared_ptr<Active> active) {
    --in_flight_;
    last_completion_ = Clock::now();
    n_tokens_out_ += record.n_tokens_out;
    if (!record.ok()) ++n_errors_;
    result_.records.push_back(std::move(record));
    if (!queued_.empty()) {
      auto [next_active, next_turn] = std::move(queued_.front());
      queued_.pop_front();
      dispatch(std::move(next_active), std::move(next_turn));
    }
    ++active->turn;
    if (think_time_s <= 0) return send_next_turn(std::move(active));
    auto timer = std::make_shared<asio::steady_timer>(*contexts_[0], seconds(think_time_s));
    timer->async_wait([this, timer, active](boost::system::error_code) mutable { send_next_turn(std::move(active)); });
  }

  void maybe_end() {
    if (ended_ || n_conversations_done_ < workload_.n_conversations() || in_flight_ > 0) return;
    ended_ = true;
    result_.duration_s = result_.records.empty() ? 0.0 : std::chrono::duration<double>(last_completion_ - t0_).count();
    progress_timer_->cancel();
    metrics_timer_->cancel();
    arrival_timer_->cancel();
    if (options_.show_progress) print_progress(/*final=*/true);
    if (options_.scrape_metrics && result_.metrics_error.empty()) {
      scrape([this] { stop(); });
    } else {
      stop();
    }
  }

  void stop() {
    for (auto& guard : guards_) guard.reset();
  }

  // Reads the metrics page once, then calls next. A first read that fails or finds nothing
  // recognizable turns scraping off for the run.
  template <typename Next>
  void scrape(Next next) {
    auto text = std::make_shared<std::string>();
    const double t_s = t0_ == Clock::time_point() ? 0.0 : now_s();  // 0 before the load
    clients_[0]->request(
        options_.metrics_path, "", 10.0, [text](std::string_view bytes) { text->append(bytes); },
        [this, text, t_s, next](const HttpResult& http) {
          if (!http.error.empty()) {
            result_.metrics_error = "GET " + options_.metrics_path + ": " + http.error + " (" + http.detail + ")";
          } else {
            ServerMetrics m = parse_server_metrics(*text);
            if (m.empty() && result_.metrics.empty()) {
              result_.metrics_error = "no recognized metric on " + options_.metrics_path;
            } else {
              result_.metrics.push_back({t_s, m});
            }
          }
          if (!result_.metrics_error.empty()) result_.metrics.clear();
          next();
        });
  }

  void tick_metrics() {
    metrics_timer_->expires_after(seconds(options_.metrics_interval_s));
    metrics_timer_->async_wait([this](boost::system::error_code ec) {
      if (ec || ended_ || !result_.metrics_error.empty()) return;
      scrape([this] {
        if (!ended_) tick_metrics();
      });
    });
  }

  // A line each progress_interval_s on a terminal (rewritten in place), each 10x that in a log.
  void tick_progress() {
    static const bool tty = isatty(STDERR_FILENO);
    progress_timer_->expires_after(seconds(options_.progress_interval_s * (tty ? 1 : 10)));
    progress_timer_->async_wait([this](boost::system::error_code ec) {
      if (ec || ended_) return;
      print_progress(/*final=*/false);
      tick_progress();
    });
  }

  void print_progress(bool final) {
    const bool tty = isatty(STDERR_FILENO);
    const double t = now_s();
    std::fprintf(stderr, "%s[%s] %6.1f s  conversations %lld/%lld  requests %zu done, %lld in flight, %lld failed  %.0f out tok/s%s",
                 tty ? "\r" : "", options_.label.c_str(), t, static_cast<long long>(n_conversations_done_),
                 static_cast<long long>(workload_.n_conversations()), result_.records.size(),
                 static_cast<long long>(in_flight_), static_cast<long long>(n_errors_),
                 t > 0 ? static_cast<double>(n_tokens_out_) / t : 0.0, tty && !final ? "" : "\n");
    std::fflush(stderr);
  }

  const Workload& workload_;
  const ApiOptions& api_;
  const LoadOptions& options_;
  Rng arrival_rng_;
  std::vector<std::unique_ptr<asio::io_context>> contexts_;  // [0] also runs the driver
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::unique_ptr<HttpClient>> clients_;          // one per context
  std::optional<asio::steady_timer> progress_timer_, metrics_timer_, arrival_timer_;

  // Driver state: touched only on contexts_[0].
  Clock::time_point t0_;
  Clock::time_point last_completion_;
  int64_t next_index_ = 0;  // conversations started (trace mode: position in trace_order_)
  std::vector<int64_t> trace_order_;
  int64_t n_conversations_done_ = 0;
  int64_t in_flight_ = 0;
  int64_t n_errors_ = 0;
  int64_t n_tokens_out_ = 0;
  size_t next_client_ = 0;
  std::deque<std::pair<std::shared_ptr<Active>, TurnRequest>> queued_;
  bool ended_ = false;
  LoadResult result_;
};

}  // namespace

Result<LoadResult> run_load(const Workload& workload, const ApiOptions& api, const Endpoint& endpoint,
                            const LoadOptions& options) {
  if (options.n_threads < 1) return Status::Error("--client-threads must be >= 1");
  switch (options.mode) {
    case LoadOptions::Mode::kConcurrency:
      if (options.concurrency < 1) return Status::Error("--concurrency must be >= 1");
      break;
    case LoadOptions::Mode::kRate:
      if (!(options.rate > 0)) return Status::Error("--request-rate must be > 0");
      break;
    case LoadOptions::Mode::kTrace:
      for (int64_t i = 0; i < workload.n_conversations(); ++i) {
        if (!workload.arrival_s(i)) {
          return Status::Error("trace timing: request " + std::to_string(i) + " has no timestamp");
        }
      }
      break;
  }
  LoadDriver driver(workload, api, endpoint, options);
  return driver.run();
}

}  // namespace deepinfer::bench

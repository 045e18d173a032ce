#include "bench/stub_server.h"

#include "bench/word_text.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_set>

namespace deepinfer::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

Clock::duration ms(double v) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(v));
}

// State shared by all connections.
struct Server {
  explicit Server(const StubOptions& o) : options(o) {}
  StubOptions options;
  std::atomic<int64_t> n_requests{0};   // generation requests received
  std::atomic<int64_t> n_in_flight{0};  // generations in progress
  std::mutex cache_mutex;
  std::unordered_set<uint64_t> cache;   // block chain hashes seen
  int64_t n_queried = 0, n_hit = 0;     // prompt tokens, under cache_mutex

  // Looks the prompt up in the prefix cache and adds its blocks; returns the tokens found.
  int64_t lookup_and_insert(const std::vector<std::string_view>& tokens) {
    std::vector<uint64_t> chain;
    uint64_t h = 1469598103934665603ULL;  // FNV-1a over tokens, '\0'-separated
    const size_t n_blocks = tokens.size() / static_cast<size_t>(options.block_tokens);
    for (size_t b = 0; b < n_blocks; ++b) {
      for (size_t t = 0; t < static_cast<size_t>(options.block_tokens); ++t) {
        for (char c : tokens[b * static_cast<size_t>(options.block_tokens) + t]) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
        h = h * 1099511628211ULL;
      }
      chain.push_back(h);
    }
    std::lock_guard lock(cache_mutex);
    size_t hit_blocks = 0;
    while (hit_blocks < chain.size() && cache.count(chain[hit_blocks])) ++hit_blocks;
    cache.insert(chain.begin(), chain.end());
    const int64_t hit = static_cast<int64_t>(hit_blocks) * options.block_tokens;
    n_queried += static_cast<int64_t>(tokens.size());
    n_hit += hit;
    return hit;
  }

  std::string metrics_text() {
    int64_t queried, hit;
    {
      std::lock_guard lock(cache_mutex);
      queried = n_queried;
      hit = n_hit;
    }
    char kv[64];
    std::snprintf(kv, sizeof kv, "%.6f", static_cast<double>(n_in_flight.load()) / static_cast<double>(options.kv_slots));
    return "# HELP deepinfer_kv_cache_usage_ratio Generations in flight / KV slots.\n"
           "# TYPE deepinfer_kv_cache_usage_ratio gauge\n"
           "deepinfer_kv_cache_usage_ratio " + std::string(kv) + "\n"
           "# TYPE deepinfer_prompt_tokens_total counter\n"
           "deepinfer_prompt_tokens_total " + std::to_string(queried) + "\n"
           "# TYPE deepinfer_cached_prompt_tokens_total counter\n"
           "deepinfer_cached_prompt_tokens_total " + std::to_string(hit) + "\n"
           "# TYPE deepinfer_requests_total counter\n"
           "deepinfer_requests_total{endpoint=\"generate\"} " + std::to_string(n_requests.load()) + "\n";
  }
};

// One generation: what to send and when.
struct Generation {
  bool chat = false;
  bool stream = true;
  bool include_usage = false;
  int64_t n_prompt = 0;
  int64_t n_out = 0;
  std::string id;
  Clock::time_point t_first;  // when the first token is due

  // When output token k (0-based) is due.
  Clock::time_point due(int64_t k, const StubOptions& o) const {
    const int64_t n_stalls = o.stall_every > 0 ? k / o.stall_every : 0;
    return t_first + ms(o.itl_ms * static_cast<double>(k) + o.stall_ms * static_cast<double>(n_stalls));
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server), timer_(stream_.get_executor()) {}

  void read() {
    request_ = {};
    http::async_read(stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->route();
    });
  }

 private:
  void route() {
    const std::string target(request_.target());
    if (request_.method() == http::verb::get) {
      if (target == "/metrics") return reply(200, "text/plain; version=0.0.4", server_.metrics_text());
      if (target == "/health") return reply(200, "text/plain", "ok");
      if (target == "/v1/models") {
        json models = {{"object", "list"},
                       {"data", {{{"id", server_.options.model}, {"object", "model"}, {"owned_by", "deepinfer"}}}}};
        return reply(200, "application/json", models.dump());
      }
    }
    if (request_.method() == http::verb::post && (target == "/v1/completions" || target == "/v1/chat/completions")) {
      return generate(target == "/v1/chat/completions");
    }
    reply(404, "application/json", error_json("no route for " + target));
  }

  static std::string error_json(const std::string& message) {
    return json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}.dump();
  }

  void reply(int status, const char* content_type, std::string body) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, content_type);
    res->keep_alive(request_.keep_alive());
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void generate(bool chat) {
    const Clock::time_point t_read = Clock::now();
    json body = json::parse(request_.body(), nullptr, false);
    if (body.is_discarded() || !body.is_object()) return reply(400, "application/json", error_json("body is not JSON"));
    const int64_t n = ++server_.n_requests;
    const StubOptions& o = server_.options;
    if (o.fail_every > 0 && n % o.fail_every == 0) {
      return reply(500, "application/json", json{{"error", {{"message", "stub failure"}, {"type", "server_error"}}}}.dump());
    }
    std::string prompt;
    if (chat) {
      if (!body.contains("messages") || !body["messages"].is_array()) {
        return reply(400, "application/json", error_json("'messages' is required"));
      }
      for (const json& m : body["messages"]) {
        if (m.is_object() && m.contains("content") && m["content"].is_string()) prompt += m["content"].get<std::string>();
      }
    } else {
      if (!body.contains("prompt") || !body["prompt"].is_string()) {
        return reply(400, "application/json", error_json("'prompt' (a string) is required"));
      }
      prompt = body["prompt"].get<std::string>();
    }
    const std::vector<std::string_view> tokens = WordText::split_tokens(prompt);
    const int64_t n_hit = server_.lookup_and_insert(tokens);
    gen_ = Generation{};
    gen_.chat = chat;
    gen_.stream = body.value("stream", false);
    gen_.include_usage = body.contains("stream_options") && body["stream_options"].is_object() &&
                         body["stream_options"].value("include_usage", false);
    gen_.n_prompt = static_cast<int64_t>(tokens.size());
    gen_.n_out = std::max<int64_t>(1, body.value("max_tokens", body.value("max_completion_tokens", o.default_max_tokens)));
    gen_.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(n);
    gen_.t_first = t_read + ms(o.ttft_ms + o.prefill_ms_per_token * static_cast<double>(gen_.n_prompt - n_hit));
    ++server_.n_in_flight;
    if (!gen_.stream) return reply_whole();
    auto header = std::make_shared<http::response<http::empty_body>>(http::status::ok, 11);
    header->set(http::field::content_type, "text/event-stream");
    header->set(http::field::cache_control, "no-cache");
    header->keep_alive(request_.keep_alive());
    header->chunked(true);
    keep_alive_ = header->keep_alive();
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
    http::async_write_header(stream_, *serializer, [self = shared_from_this(), header, serializer](beast::error_code ec, size_t) {
      if (ec) return self->end_generation(false);
      if (self->gen_.chat) {
        return self->send_event(self->chunk_json(json{{"role", "assistant"}, {"content", ""}}, nullptr), [self] { self->next_token(0); });
      }
      self->next_token(0);
    });
  }

  // One chunk of the stream; `piece` is the delta (chat) or the text (completions).
  std::string chunk_json(const json& piece, const char* finish_reason) const {
    json choice = {{"index", 0}, {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
    if (gen_.chat) {
      choice["delta"] = piece;
    } else {
      choice["text"] = piece;
      choice["logprobs"] = nullptr;
    }
    return json{{"id", gen_.id},
                {"object", gen_.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", 0},
                {"model", server_.options.model},
                {"choices", json::array({choice})}}
        .dump();
  }

  json usage_json() const {
    return {{"prompt_tokens", gen_.n_prompt}, {"completion_tokens", gen_.n_out}, {"total_tokens", gen_.n_prompt + gen_.n_out}};
  }

  static std::string token_text(int64_t k) { return " token" + std::to_string(k); }

  void next_token(int64_t k) {
    timer_.expires_at(gen_.due(k, server_.options));
    timer_.async_wait([self = shared_from_this(), k](beast::error_code ec) {
      if (ec) return self->end_generation(false);
      const bool last = k + 1 == self->gen_.n_out;
      const std::string text = token_text(k);
      std::string data = self->gen_.chat ? self->chunk_json(json{{"content", text}}, last ? "length" : nullptr)
                                         : self->chunk_json(text, last ? "length" : nullptr);
      self->send_event(std::move(data), [self, k, last] {
        if (!last) return self->next_token(k + 1);
        self->finish_stream();
      });
    });
  }

  void finish_stream() {
    std::string tail;
    if (gen_.include_usage) {
      json usage = json::parse(chunk_json(gen_.chat ? json::object() : json(""), nullptr));
      usage["choices"] = json::array();
      usage["usage"] = usage_json();
      tail += "data: " + usage.dump() + "\n\n";
    }
    tail += "data: [DONE]\n\n";
    out_ = std::move(tail);
    asio::async_write(stream_, http::make_chunk(asio::buffer(out_)), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->end_generation(false);
      asio::async_write(self->stream_, http::make_chunk_last(), [self](beast::error_code ec2, size_t) {
        self->end_generation(!ec2 && self->keep_alive_);
      });
    });
  }

  template <typename Then>
  void send_event(std::string data, Then then) {
    out_ = "data: " + data + "\n\n";
    asio::async_write(stream_, http::make_chunk(asio::buffer(out_)), [self = shared_from_this(), then](beast::error_code ec, size_t) {
      if (ec) return self->end_generation(false);
      then();
    });
  }

  void reply_whole() {
    timer_.expires_at(gen_.due(gen_.n_out - 1, server_.options));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      --self->server_.n_in_flight;
      if (ec) return self->close();
      std::string text;
      for (int64_t k = 0; k < self->gen_.n_out; ++k) text += token_text(k);
      json choice = {{"index", 0}, {"finish_reason", "length"}};
      if (self->gen_.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text}};
      } else {
        choice["text"] = text;
      }
      json out = {{"id", self->gen_.id},
                  {"object", self->gen_.chat ? "chat.completion" : "text_completion"},
                  {"created", 0},
                  {"model", self->server_.options.model},
                  {"choices", json::array({choice})},
                  {"usage", self->usage_json()}};
      self->reply(200, "application/json", out.dump());
    });
  }

  void end_generation(bool keep_alive) {
    --server_.n_in_flight;
    if (keep_alive) return read();
    close();
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  beast::tcp_stream stream_;
  Server& server_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  Generation gen_;
  bool keep_alive_ = false;
  std::string out_;  // the chunk being written
};

void accept(tcp::acceptor& acceptor, Server& server) {
  acceptor.async_accept([&acceptor, &server](beast::error_code ec, tcp::socket socket) {
    if (ec) return;
    socket.set_option(tcp::no_delay(true));
    std::make_shared<Session>(std::move(socket), server)->read();
    accept(acceptor, server);
  });
}

}  // namespace

Status run_stub_server(const StubOptions& options) {
  if (options.kv_slots < 1 || options.block_tokens < 1 || options.n_threads < 1) {
    return Status::Error("stub-server: --kv-slots, --block-tokens and --threads must be >= 1");
  }
  Server server(options);
  asio::io_context ioc(options.n_threads);
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) return Status::Error("stub-server: bad --host '" + options.host + "'");
  tcp::acceptor acceptor(ioc);
  tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("stub-server: cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " + ec.message());
  std::printf("listening on http://%s:%u\n", options.host.c_str(), acceptor.local_endpoint().port());
  std::fflush(stdout);
  accept(acceptor, server);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&ioc](beast::error_code, int) { ioc.stop(); });
  asio::steady_timer lifetime(ioc, ms(options.lifetime_s * 1e3));
  lifetime.async_wait([&ioc](beast::error_code e) {
    if (!e) ioc.stop();
  });
  std::vector<std::thread> threads;
  for (int i = 1; i < options.n_threads; ++i) threads.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : threads) t.join();
  return Status::Ok();
}

}  // namespace deepinfer::bench

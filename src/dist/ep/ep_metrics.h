// Prometheus text for /metrics of an expert-parallel rank (appended by serve): the load per
// expert and per rank from ExpertLoad, the expert copies EPLB placed, and what the exchanges cost.
//
//   deepinfer_ep_expert_tokens_total{layer,expert}   tokens this rank's rows routed to the expert
//   deepinfer_ep_window_expert_tokens{layer,expert}  the group's tokens to it over the last EPLB window
//   deepinfer_ep_expert_copies{layer,expert}         slots holding it
//   deepinfer_ep_window_rank_tokens{layer,rank}      the window's tokens each rank computes under the
//                                                    current placement (an expert's split over its copies)
//   deepinfer_ep_rank_rows_total{rank}               rows this rank's experts computed
//   deepinfer_ep_rebalances_total, deepinfer_ep_exchange_{bytes_total,seconds_total}
#pragma once

#include <string>

#include "dist/ep/mpi_group.h"
#include "model/expert_load.h"

namespace deepinfer {

std::string ep_metrics_text(const ExpertLoad::Snapshot& load, const ExchangeStats& exchanges);

}  // namespace deepinfer

// fleet_profiling MODEL.pt SHAPE SAMPLE EVENTS.jsonl CALLS
//
// What a service does to see which operators its models spend time in, as
// PyTorch's deployment note describes ("always ON" measurements, a model id
// passed down to the callbacks, API usage logging):
// - at start-up, before any model runs: install the operator observer with a
//   sampling probability and a JSON Lines sink, and the API usage logger;
// - around each request: a ModelIdGuard naming the model;
// - now and then: read the aggregated per-operator stats and ship them.
//
// Here two threads serve the same model under the ids "model-a" and
// "model-b", CALLS forwards each at the same time, and the main thread runs
// CALLS more with no id. The stats are printed one per line:
//   op <model id or -> <scope> <operator> <sampled calls> <self us>
//   api <key>
#include <torch/script.h>

#include <iostream>
#include <sstream>
#include <thread>

#include <tsarchive/operator_observer.h>

namespace {

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  for (std::string dim; std::getline(in, dim, 'x');) shape.push_back(std::stoll(dim));
  return shape;
}

void serve(torch::jit::Module& model, const torch::Tensor& input, int calls) {
  torch::NoGradGuard no_grad;
  for (int i = 0; i < calls; ++i) model.forward({input});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: fleet_profiling MODEL.pt SHAPE SAMPLE EVENTS.jsonl CALLS\n";
    return 2;
  }
  try {
    // Start-up: before any operator runs.
    tsarchive::OperatorObserverOptions options;
    options.sample = std::stod(argv[3]);
    options.events_file = argv[4];
    tsarchive::install_operator_observer(options);
    tsarchive::install_api_usage_logger();

    torch::jit::Module model = torch::jit::load(argv[1]);
    model.eval();
    const torch::Tensor input = torch::randn(parse_shape(argv[2]));
    const int calls = std::stoi(argv[5]);

    std::vector<std::thread> workers;
    for (const char* id : {"model-a", "model-b"}) {
      workers.emplace_back([&model, &input, calls, id] {
        tsarchive::ModelIdGuard tag(id);  // every operator below carries the id
        serve(model, input, calls);
      });
    }
    serve(model, input, calls);  // no guard: no model id
    for (std::thread& t : workers) t.join();

    for (const tsarchive::OperatorStats& op : tsarchive::operator_observer_snapshot().operators) {
      std::cout << "op " << (op.model_id.empty() ? "-" : op.model_id) << ' ' << op.scope << ' ' << op.name << ' '
                << op.calls << ' ' << op.self_ns / 1000 << '\n';
    }
    for (const std::string& key : tsarchive::api_usage_keys()) std::cout << "api " << key << '\n';
    tsarchive::remove_operator_observer();  // no operator runs any more
  } catch (const std::exception& e) {
    std::cerr << "fleet_profiling: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

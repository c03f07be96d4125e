// tsarchive run MODEL [--method NAME] [--input SPEC]... [--sample-inputs] [--device DEV] [--seed N]
//                     [--expect @FILE --atol A --rtol R] [--allow-nonfinite]
//                     [--save-inputs F] [--save-outputs F] [--record | --check]
//                     [--warmup N --iters N | --duration S] [--batch-sizes LIST]
//                     [--profile [--sample P] [--record-shapes] [--model-id ID] [--trace-out F]]
//                     [--api-usage] [--threads N] [--load-library LIB]... [--json]
//                     [--memory-limit SIZE] [--time-limit S] [--no-validate]
//
// The core checks the archive first (gate.h) and reads every input and
// expected-output file (host_value.h); only then does the torch layer load
// the module, from the descriptor of the file that was checked, in a worker
// process (worker.h). A .pt2 runs its AOTInductor model (core/inputs/aoti_model.h)
// the same way, with libtorch 2.x's AOTIModelPackageLoader.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "base/strings.h"
#include "cli/commands.h"
#include "cli/many_files.h"
#include "cli/output.h"
#include "cli/report_run.h"
#include "operations/run.h"
#include "cli/run_options.h"
#include "base/error.h"
#include "contract/host_value.h"
#include "core/inputs/input_values.h"
#include "cli/worker_options.h"
#include "cli/lock_options.h"

namespace tsarchive::cli {
namespace {

struct RunOptions {
  std::vector<std::string> models;  // several only with --check
  std::string model;                // the one being run
  std::string method;
  std::vector<std::string> inputs;
  bool sample_inputs = false;
  std::string device = "cpu";
  uint64_t seed = 0;
  int threads = 0;
  std::string expect;
  std::vector<std::string> atol, rtol;
  bool allow_nonfinite = false;
  std::string save_inputs, save_outputs;
  int top = 0;
  std::string labels;
  bool record = false;
  bool check = false;
  int warmup = -1;
  int iterations = 0;
  double duration = 0;
  std::vector<int64_t> batch_sizes;
  bool profile = false;
  double sample = 1.0;
  bool sample_given = false;
  bool record_shapes = false;
  std::string model_id;
  std::string trace_out;
  bool api_usage = false;
  bool json = false;
  WorkerSettings worker;
  double lock_timeout = 10;
};

SaveFormat format_for(const std::string& path) {
  return ends_with(path, ".npy") ? SaveFormat::Npy : SaveFormat::Pt;
}

HostValue read_expected(const std::string& text, InputBudget& budget) {
  if (text.empty() || text[0] != '@') {
    throw_usage("--expect takes a file as @FILE; '" + text.substr(0, 60) + "' has no @",
                "write it as --expect @" + (text.empty() ? std::string("golden.pt") : text.substr(0, 60)));
  }
  // Any value: tensors, and scalars (torch.save(9.0), a str, a bool, None),
  // lists, tuples and dicts of them, compared leaf by leaf.
  return parse_input_argument(text, budget);
}

RunImageOptions image_options(const RunOptions& opts) {
  return {is_image_output(opts.save_outputs) ? opts.save_outputs : std::string(), opts.top, opts.labels};
}

bool wants_profile(const RunOptions& opts) {
  return opts.profile || opts.sample_given || opts.record_shapes || !opts.model_id.empty() || !opts.trace_out.empty();
}

std::string file_name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }  // npos + 1 == 0

// What the options ask, before the archive is opened: flags checked against
// each other, inputs and expected outputs read.
RunRequest request_from_options(const RunOptions& opts) {
  if (opts.record && opts.check) throw_usage("--record and --check exclude each other");
  if (opts.check && !opts.inputs.empty()) throw_usage("--check replays the recorded inputs; leave out --input");
  if (opts.check && !opts.expect.empty()) throw_usage("--check compares with the recorded outputs; leave out --expect");
  if (opts.sample_inputs && !opts.inputs.empty()) throw_usage("--sample-inputs and --input exclude each other");
  if (opts.sample_inputs && opts.check) throw_usage("--check replays the recorded inputs; leave out --sample-inputs");
  if (opts.iterations > 0 && opts.duration > 0) throw_usage("give --iters or --duration, not both");
  const bool profile = wants_profile(opts);  // any profiling option asks for profiling
  if (profile && !opts.batch_sizes.empty()) throw_usage("--profile times one input size; leave out --batch-sizes");
  if (!(opts.sample > 0 && opts.sample <= 1)) {
    throw_usage("--sample " + short_number(opts.sample) + " is not a probability in (0, 1]", "e.g. --sample 0.01 for 1 in 100 operator calls");
  }

  RunRequest request;
  request.display_name = opts.model;
  request.device = opts.device;
  request.seed = opts.seed;
  request.threads = opts.threads;
  request.libraries = opts.worker.libraries;  // also loaded by the worker (load_job_libraries): a second dlopen is a no-op
  request.iterations = opts.iterations;
  request.duration_s = opts.duration;
  request.batch_sizes = opts.batch_sizes;
  if ((!request.batch_sizes.empty() || profile) && request.iterations == 0 && request.duration_s == 0) request.iterations = 100;
  request.profile.enabled = profile;
  request.profile.sample = opts.sample;
  request.profile.record_shapes = opts.record_shapes;
  request.profile.model_id = opts.model_id.empty() ? file_name_of(opts.model) : opts.model_id;
  request.profile.keep_events = !opts.trace_out.empty();
  request.profile.trace_name = opts.trace_out;
  request.api_usage = opts.api_usage;
  const bool timed = request.iterations > 0 || request.duration_s > 0;
  request.warmup = opts.warmup >= 0 ? opts.warmup : (timed ? 10 : 0);
  if (!opts.save_inputs.empty()) request.save_inputs = format_for(opts.save_inputs);
  if (!opts.save_outputs.empty() && !is_image_output(opts.save_outputs)) request.save_outputs = format_for(opts.save_outputs);
  if (opts.record) request.save_inputs = request.save_outputs = SaveFormat::Pt;
  if (!opts.labels.empty() && opts.top == 0) throw_usage("--labels names the classes of --top K; give --top too");
  if (is_image_output(opts.save_outputs)) (void)parse_image_output(opts.save_outputs);  // bad options: before the run
  request.save_outputs = image_outputs_format(image_options(opts), request.save_outputs);
  // The worker holds the inputs and the expected outputs together.
  InputBudget budget = input_budget(opts.worker);
  for (const std::string& text : opts.inputs) request.inputs.push_back(parse_input_argument(text, budget));
  if (!opts.expect.empty()) request.expect = read_expected(opts.expect, budget);
  request.method = opts.method.empty() ? "forward" : opts.method;
  apply_tolerances(opts.atol, "--atol", request);
  apply_tolerances(opts.rtol, "--rtol", request);
  return request;
}

// "-" for standard input (MODEL, @-) and output (--save-inputs/--save-outputs):
// each stream once.
void check_standard_streams(const RunOptions& opts) {
  int reads = is_standard_stream(opts.model) ? 1 : 0;
  for (const std::string& input : opts.inputs) reads += input == "@-" ? 1 : 0;
  reads += opts.expect == "@-" ? 1 : 0;
  if (reads > 1) throw_usage("standard input can be read once: MODEL '-', --input @- and --expect @- name it together");
  if (is_standard_stream(opts.save_inputs) && is_standard_stream(opts.save_outputs)) {
    throw_usage("--save-inputs - and --save-outputs - both name standard output", "write one of them to a file");
  }
}

// The saved values are binary (.pt, .npy): never on a terminal.
void check_saved_on_terminal(const RunOptions& opts, const Context& ctx) {
  if (is_standard_stream(opts.save_inputs)) refuse_binary_on_terminal(ctx, "--save-inputs -", "the inputs");
  if (is_standard_stream(opts.save_outputs)) refuse_binary_on_terminal(ctx, "--save-outputs -", "the outputs");
}

// --save-inputs, --save-outputs and --trace-out: never a file the run reads
// (the model, input, expected-output and labels files), nor one another.
void check_outputs(const RunOptions& opts) {
  const std::string picture = is_image_output(opts.save_outputs) ? parse_image_output(opts.save_outputs).path : "";
  std::vector<NamedPath> inputs = input_files(opts.inputs, "--input");
  const std::vector<NamedPath> expected = input_files({opts.expect}, "--expect");
  inputs.insert(inputs.end(), expected.begin(), expected.end());
  inputs.push_back({"the model", opts.model});
  if (opts.labels.rfind("extra:", 0) != 0) inputs.push_back({"--labels", opts.labels});
  check_output_paths({{"--save-inputs", opts.save_inputs},
                      {"--save-outputs", picture.empty() ? opts.save_outputs : picture},
                      {"--trace-out", opts.trace_out}},
                     inputs);
}

RunSettings settings_from_options(const RunOptions& opts) {
  RunSettings settings;
  settings.model = opts.model;
  settings.request = request_from_options(opts);
  settings.method = opts.method;
  settings.check = opts.check;
  settings.record = opts.record;
  settings.sample_inputs = opts.sample_inputs;
  settings.tolerances_given = !opts.atol.empty() || !opts.rtol.empty();
  settings.images = image_options(opts);
  settings.verdict.expect =
      opts.check ? std::string("the recorded check") : opts.expect.empty() ? std::string() : opts.expect.substr(1);
  settings.verdict.allow_nonfinite = opts.allow_nonfinite;
  settings.lock_timeout = opts.lock_timeout;
  settings.worker = opts.worker;
  return settings;
}

int run_run(const RunOptions& opts, Context& ctx) {
  check_standard_streams(opts);
  check_saved_on_terminal(opts, ctx);
  check_outputs(opts);
  RunSettings settings = settings_from_options(opts);
  if (::isatty(STDERR_FILENO) == 1 && !opts.json) {
    settings.request.on_progress = [&ctx](const std::string& line) {
      ctx.err << "\r\033[K" << line << std::flush;  // erase the line, then write it again
    };
  }
  const RunVerdict verdict = settings.verdict;
  const RunResult result = run_archive(std::move(settings), notes_on(ctx.err));
  const RunReport& report = result.report;

  if (!opts.save_inputs.empty()) write_output_file(ctx, opts.save_inputs, report.saved_inputs);
  if (!opts.save_outputs.empty() && !is_image_output(opts.save_outputs)) {
    write_output_file(ctx, opts.save_outputs, report.saved_outputs);
  }
  // Values saved to stdout: the report goes to stderr.
  std::ostream& report_out =
      report_stream(ctx, is_standard_stream(opts.save_inputs) || is_standard_stream(opts.save_outputs));
  if (!opts.trace_out.empty() && report.profile) {
    write_file_atomically(opts.trace_out,
                          trace_file_text(*report.profile, "tsarchive run " + file_name_of(opts.model), ::getpid()));
  }
  if (opts.json) {
    nlohmann::ordered_json doc = run_to_json(report, opts.model, verdict);
    if (result.top) doc["top"] = top_to_json(*result.top);
    report_out << json_text(doc, ctx.json_indent) << '\n';
  } else {
    write_text(report_out, [&](std::ostream& text) {
      render_run_text(report, opts.model, verdict, text);
      if (result.top) render_top_text(*result.top, text);
    });
  }
  return report_run_failures(report, opts.model, verdict, ctx.err);
}


}  // namespace

namespace {

constexpr const char* kRunDescription =
    "Load a model with libtorch (after the archive passes verify's checks), call a method on generated or\n"
    "given inputs, and describe every output: type, shape, dtype, device, min/max/mean/std, NaN and Inf.\n"
    "Exit 1 when an output holds NaN/Inf (unless --allow-nonfinite) or differs from --expect / --check.\n"
    "\n"
    "Inputs, one --input per parameter in order:\n"
    "  SHAPE[:DTYPE[:FILL]]  1x3x224x224 (float32, normal), 8x128:int64:zeros, 2x3:float16:ones,\n"
    "                        16:int64:range, scalar:float64; FILL: normal uniform zeros ones range\n"
    "                        full=V randint=LOW,HIGH (ints default to randint=0,10)\n"
    "  @FILE.npy | @FILE.pt  a NumPy array, or torch.save of a tensor or a list/tuple of tensors\n"
    "  json:TEXT             non-tensor values by the method's schema: json:2.5, json:[1,2], json:{\"a\":\"1x3\"}\n"
    "  @PICTURE[:OPTIONS]    a PNG, JPEG or BMP file, a folder of them or files joined by ',' (a batch): float32\n"
    "                        [N, 3, H, W] in [0, 1], prepared as torchvision does from PIL; OPTIONS joined by ':'\n"
    "                        resize=N (shorter side) | resize=HxW, crop=N|HxW (centre), normalize=imagenet|none,\n"
    "                        mean=M[,M,M], std=S[,S,S], layout=nchw|nhwc|chw|hwc, channels=rgb|bgr,\n"
    "                        dtype=float32|uint8, e.g. @cat.jpg:resize=256:crop=224:normalize=imagenet\n"
    "Without --input, it says which inputs the method needs.\n"
    "--save-outputs out.png[:OPTIONS] writes an output [1, C, H, W] or [C, H, W] (C = 1, 3, 4) as a picture:\n"
    "floating values x 255, clamped; normalize/mean/std/channels/layout undo what the input options did.\n"
    "\n"
    "A .pt2 runs its AOTInductor model (torch._inductor.aoti_compile_and_package) through libtorch 2.x's\n"
    "AOTIModelPackageLoader: its compiled code, loaded only by run. Inputs are its tensors in order (--input,\n"
    "or --sample-inputs for the package's data/sample_inputs/); --method names the model (default: model).\n"
    "A .pt2 without compiled artifacts (torch.export.save) is refused: compile it first.\n"
    "Needs tsarchive built against libtorch 2.x (exit 5 otherwise)."
    "\n"
    "--profile adds a table of the operators the timed calls ran (calls, total and self time), --sample P\n"
    "observes 1 in 1/P operator calls (estimates), --trace-out writes a Chrome trace for Perfetto: Kineto's\n"
    "trace where libtorch has Kineto (2.x from pip; CUDA kernels too with --device cuda), else one made from\n"
    "the observer's calls (libtorch 1.13). The output says which (trace: kineto / trace: tsarchive observer).";

// --warmup, --iters, --duration, --batch-sizes and the profiling options.
void add_timing_options(CLI::App& app, const std::shared_ptr<RunOptions>& opts) {
  app.add_option("--warmup", opts->warmup, "Untimed calls before timing (default: 10 when timing)")->check(CLI::Range(0, 1000000));
  app.add_option("--iters", opts->iterations, "Timed calls: report min, mean, p50, p90, p99, max and throughput")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--duration", opts->duration, "Time calls for this many seconds instead of --iters")
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--batch-sizes", opts->batch_sizes, "Time each batch size (leading dimension of generated inputs), e.g. 1,8,32")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--profile", opts->profile,
               "Profile the operators of the timed calls (default --iters 100): calls, total and self time per operator");
  app.add_option("--sample", opts->sample, "Observe each operator call with this probability (default 1); implies --profile")
      ->each([opts](const std::string&) { opts->sample_given = true; });
  app.add_flag("--record-shapes", opts->record_shapes, "Also record input shapes, one row per shape list; implies --profile");
  app.add_option("--model-id", opts->model_id, "Model id in every profiled event (default: the file name); implies --profile");
  app.add_option("--trace-out", opts->trace_out,
                 "Write the profiled calls as a Chrome trace (chrome://tracing, Perfetto): Kineto's where libtorch has "
                 "it; implies --profile");
}

}  // namespace

Runner setup_run(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<RunOptions>();
  app.description(kRunDescription);
  app.add_option("model", opts->models,
                 "TorchScript archive (.pt), lite-interpreter archive (.ptl) or AOTInductor package (.pt2); - reads "
                 "stdin; several with --check")
      ->required();
  app.add_option("-m,--method", opts->method, "Method to call (default: forward); for a .pt2, the AOTInductor model (default: model)");
  app.add_option("-i,--input", opts->inputs, "An input (forms below); repeat in argument order");
  app.add_flag("--sample-inputs", opts->sample_inputs, "A .pt2: run on the package's own sample inputs (data/sample_inputs/MODEL.pt)");
  app.add_option("--device", opts->device, "cpu, cuda or cuda:N (default: cpu)");
  app.add_option("--seed", opts->seed, "Seed of generated inputs (default: 0; same values as Python's torch.manual_seed)");
  app.add_option("--threads", opts->threads, "Intra-op threads (default: libtorch's choice)")->check(CLI::Range(1, 1024));
  app.add_option("--expect", opts->expect, "Compare the outputs with @golden.pt or @golden.npy");
  app.add_option("--atol", opts->atol, "Absolute tolerance (default 1e-5); PATH=A for one output, e.g. out[1]=1e-3");
  app.add_option("--rtol", opts->rtol, "Relative tolerance (default 1e-3); PATH=R for one output");
  app.add_flag("--allow-nonfinite", opts->allow_nonfinite, "Do not fail when an output holds NaN or Inf");
  app.add_option("--save-inputs", opts->save_inputs,
                 "Write the inputs to FILE (.pt: torch.save format; .npy: one tensor; - for stdout in .pt format)");
  app.add_option("--save-outputs", opts->save_outputs,
                 "Write the outputs to FILE (.pt or .npy; -: stdout, .pt format, and the report goes to stderr), or one "
                 "picture output to FILE.png[:OPTIONS] (below)");
  app.add_option("--top", opts->top, "Print the K largest scores of a classifier's output [1, N] with softmax probabilities")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--labels", opts->labels,
                 "Class names for --top: extra:NAME (an extra file) or a file (JSON or one per line; default: the "
                 "archive's extra/labels.json)");
  app.add_flag("--record", opts->record,
               "Store this run's inputs and outputs in the archive's extra/tsarchive/ (other records keep their bytes; "
               "in a .pt2, as base64 text)");
  app.add_flag("--check", opts->check, "Replay the recorded inputs and compare with the recorded outputs");
  add_timing_options(app, opts);
  app.add_flag("--api-usage", opts->api_usage, "List the API usage keys libtorch fired (c10::SetAPIUsageLogger)");
  app.add_flag("--json", opts->json, "One JSON document (schema tsarchive.run/1; tsarchive.profile/1 with --profile)");
  app.add_flag("-v,--verbose", ctx.verbose, "On a libtorch error, also print its full message");
  add_worker_options(app, opts->worker, true);
  note_input_budget(app, "--input and --expect");
  add_lock_timeout(app, opts->lock_timeout, "With --record: ");
  return [opts, &ctx] {
    if (opts->models.size() > 1 && !opts->check) {
      throw_usage("run takes one model, or several with --check (each replays its own recorded check)");
    }
    if (opts->models.size() > 1 && (!opts->save_inputs.empty() || !opts->save_outputs.empty() || !opts->trace_out.empty())) {
      throw_usage("--save-inputs, --save-outputs and --trace-out name one file; " +
                  std::to_string(opts->models.size()) + " models were given");
    }
    return for_each_file(opts->models, opts->json, ctx, [&](const std::string& model) {
      opts->model = model;
      return run_run(*opts, ctx);
    });
  };
}

}  // namespace tsarchive::cli

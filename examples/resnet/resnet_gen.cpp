// resnet_gen: writes a ResNet model as .synk text (resnet_model.h) to stdout or --out, for
// reading, for `synkc`, or for any program that loads a model file (the Fashion-MNIST trainer
// takes resnet20_fashion.synk, which is this program's output for `--fashion --depth 20`).
//
//   resnet_gen --depth 50 --image-size 224 --classes 1000 [--channels 3] [--pad-to N] [--out FILE]
//   resnet_gen --fashion --depth 20      (u8[n, 784] Fashion-MNIST images, padded to 32x32, 10 classes)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "dsl/frontend.h"
#include "examples/cli_checks.h"
#include "examples/resnet/resnet_model.h"

int main(int argc, char** argv) {
  using synk_examples::at_least;
  using synk_examples::in_range;
  resnet::Config cfg;
  std::string out;
  bool optimizer_given = false;
  CLI::App app{"Writes a ResNet model (18/34/50 ImageNet style, 20/32/44/56 CIFAR style) as .synk text."};
  app.add_option("--depth", cfg.depth, "18, 34, 50, 20, 32, 44 or 56")->capture_default_str()->check(at_least(1, 1000));
  app.add_option("--image-size", cfg.image, "input height and width")->capture_default_str()->check(at_least(1, 1 << 16));
  app.add_option("--pad-to", cfg.pad_to, "zero-pad the input to this size in the stem (0: none)")
      ->capture_default_str()
      ->check(at_least(0, 1 << 16));
  app.add_option("--channels", cfg.channels, "input channels")->capture_default_str()->check(at_least(1, 1 << 16));
  app.add_option("--classes", cfg.classes, "output classes")->capture_default_str()->check(at_least(2, 1 << 20));
  app.add_flag("--fashion", cfg.fashion,
               "Fashion-MNIST form: u8[n, 784] images padded to 32x32, 10 classes, train_device");
  app.add_option("--optimizer", cfg.optimizer, "the declared update rule, as .synk text")->capture_default_str();
  app.add_option("--weight-decay", cfg.weight_decay,
                 "weight decay of the training functions: an L2 term W/2 * sum(w * w) over the weights (0: none)")
      ->check(in_range(0, false, 1e6, false, "a number >= 0"));
  app.add_flag("--flip", cfg.flip, "training images mirrored left to right at random (probability 1/2)");
  app.add_option("--label-smoothing", cfg.label_smoothing,
                 "label smoothing E of the training loss: (1 - E) * cross_entropy - E * mean(log_softmax) (0: none)")
      ->check(in_range(0, false, 1, true, "a number in [0, 1)"));
  app.add_option("--out", out, "output file (default: stdout)");
  if (std::optional<int> status = synk_examples::parse_command_line(app, argc, argv, "resnet_gen")) return *status;
  optimizer_given = app.count("--optimizer") > 0;
  // The header quotes a canonical command line (not argv), so the text does not depend on --out.
  if (cfg.fashion) {
    cfg.image = 28, cfg.pad_to = 32, cfg.channels = 1, cfg.classes = 10;
    cfg.command = fmt::format("resnet_gen --fashion --depth {}", cfg.depth);
  } else {
    cfg.command = fmt::format("resnet_gen --depth {} --image-size {} --channels {} --classes {}", cfg.depth, cfg.image,
                              cfg.channels, cfg.classes);
    if (cfg.pad_to) cfg.command += fmt::format(" --pad-to {}", cfg.pad_to);
  }
  if (optimizer_given) cfg.command += fmt::format(" --optimizer '{}'", cfg.optimizer);
  if (cfg.weight_decay > 0) cfg.command += fmt::format(" --weight-decay {}", cfg.weight_decay);
  if (cfg.flip) cfg.command += " --flip";
  if (cfg.label_smoothing > 0) cfg.command += fmt::format(" --label-smoothing {}", cfg.label_smoothing);
  try {
    const std::string text = resnet::generate(cfg);
    try {   // never write a model that does not compile (an --optimizer is pasted in as written)
      synk::dsl::compile_source("<generated model>", text);
    } catch (const synk::UserError& e) {
      fmt::print(stderr, "resnet_gen: error: the generated model does not compile{}:\n{}\n",
                 optimizer_given ? fmt::format(" (is --optimizer '{}' an update rule?)", cfg.optimizer) : "",
                 e.what());
      return 2;
    }
    if (out.empty()) {
      std::cout << text;
    } else {
      std::ofstream file(out);
      file << text;
      if (!file.flush()) throw std::runtime_error(fmt::format("cannot write '{}'", out));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "resnet_gen: error: {}\n", e.what());
    return 1;
  }
  return 0;
}

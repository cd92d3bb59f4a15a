// The ResNet .synk generator (resnet_model.h). The text is built in three parts: the shared
// declarations (collected while the layers are laid out, so each conv gets its weights and
// batch-norm variables in network order), the helpers (conv-BN by kernel/stride/padding, the
// blocks, the stem and the classifier, each in a training and an evaluation form because
// batch_norm's `training=` must be a literal), and the functions.
#include "examples/resnet/resnet_model.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace resnet {
namespace {

// One conv-BN layer: the shared-variable prefix and the conv's shape.
struct ConvBn {
  std::string name;
  int in = 0, out = 0, kernel = 3, stride = 1, padding = 1;
};

// A residual block: its convs (2 basic, 3 bottleneck) and the projection shortcut (or none).
struct Block {
  std::vector<ConvBn> convs;
  bool has_down = false;
  ConvBn down;
  std::string helper;  // basic, basic_down, bottleneck, bottleneck_proj, bottleneck_down
};

struct Network {
  ConvBn stem;
  bool stem_pool = false;  // ImageNet style: 3x3 stride-2 max pool after the stem
  std::vector<Block> blocks;
  int features = 0;  // channels into the classifier
};

// The helper computing conv(kernel, stride, padding) then batch norm, e.g. conv3s2_bn.
std::string conv_helper(const ConvBn& c) {
  std::string name = fmt::format("conv{}", c.kernel);
  if (c.stride != 1) name += fmt::format("s{}", c.stride);
  if (c.padding != c.kernel / 2) name += fmt::format("p{}", c.padding);
  return name + "_bn";
}

Network layout(const Config& cfg) {
  Network net;
  const int extra = cfg.pad_to > cfg.image ? (cfg.pad_to - cfg.image) / 2 : 0;
  std::vector<int> counts, widths;
  bool bottleneck = false;
  if (imagenet_style(cfg.depth)) {
    counts = cfg.depth == 18 ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
    widths = {64, 128, 256, 512};
    bottleneck = cfg.depth == 50;
    net.stem = {"stem", cfg.channels, 64, 7, 2, 3 + extra};
    net.stem_pool = true;
  } else {
    const int n = (cfg.depth - 2) / 6;
    counts = {n, n, n};
    widths = {16, 32, 64};
    net.stem = {"stem", cfg.channels, 16, 3, 1, 1 + extra};
  }
  const int expansion = bottleneck ? 4 : 1;
  int in = net.stem.out;
  for (size_t s = 0; s < counts.size(); ++s) {
    const int width = widths[s], out = width * expansion;
    for (int b = 0; b < counts[s]; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      const std::string p = fmt::format("s{}b{}", s + 1, b);
      Block block;
      if (bottleneck) {
        block.convs = {
            {p + "_c1", in, width, 1, 1, 0}, {p + "_c2", width, width, 3, stride, 1}, {p + "_c3", width, out, 1, 1, 0}};
      } else {
        block.convs = {{p + "_c1", in, width, 3, stride, 1}, {p + "_c2", width, width, 3, 1, 1}};
      }
      block.has_down = stride != 1 || in != out;
      if (block.has_down) block.down = {p + "_down", in, out, 1, stride, 0};
      block.helper = std::string(bottleneck ? "bottleneck" : "basic") + (!block.has_down ? ""
                                                                         : stride == 1   ? "_proj"
                                                                                         : "_down");
      net.blocks.push_back(block);
      in = out;
    }
  }
  net.features = in;
  return net;
}

// Joins `items` with ", " and breaks lines before 100 columns, continuing at `indent`.
std::string wrap(const std::string& head, const std::vector<std::string>& items, const std::string& tail,
                 const std::string& indent, const std::string& separator = ", ") {
  std::string text = head;
  const size_t line_start = head.rfind('\n');
  size_t column = line_start == std::string::npos ? head.size() : head.size() - line_start - 1;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string piece = items[i] + (i + 1 < items.size() ? separator : "");
    if (column + piece.size() > 100 && column > indent.size()) {
      while (!text.empty() && text.back() == ' ') text.pop_back();
      text += "\n" + indent;
      column = indent.size();
    }
    text += piece;
    column += piece.size();
  }
  return text + tail;
}

std::vector<std::string> variables(const ConvBn& c) {
  return {c.name + "_w", c.name + "_g", c.name + "_b", c.name + "_mean", c.name + "_var"};
}

// Shared declarations of one conv-BN: He-normal weights (fan_out, as torchvision's ResNet), the
// batch-norm scale 1, shift 0, running mean 0 and variance 1.
std::string declare(const ConvBn& c, int& seed) {
  const double stdev = std::sqrt(2.0 / double(c.out * c.kernel * c.kernel));
  return fmt::format(
      "shared {0}_w: f32[{1}, {2}, {3}, {3}] = normal(seed={4}, std={5:.9g});\n"
      "shared {0}_g: f32[{1}] = ones;\nshared {0}_b: f32[{1}];\nshared {0}_mean: f32[{1}];\n"
      "shared {0}_var: f32[{1}] = ones;\n",
      c.name, c.out, c.in, c.kernel, seed++, stdev);
}

// The conv-BN helper for one kernel/stride/padding; `training` reaches batch_norm's training=.
std::string conv_bn_helper(const ConvBn& c) {
  const std::string stride = c.stride != 1 ? fmt::format(", stride={}", c.stride) : "";
  return fmt::format(
      "def {}(x, w, g, b, m, v, training) {{\n"
      "  return batch_norm(conv2d(x, w{}, padding={}), g, b, m, v, training=training);\n}}\n",
      conv_helper(c), stride, c.padding);
}

// A block helper: parameters w1..v1, w2..v2 (, w3..v3) (, wd..vd), training.
std::string block_helper(const Block& block) {
  std::vector<std::string> params{"x"};
  auto group = [&](const std::string& k) {
    for (const char* v : {"w", "g", "b", "m", "v"}) params.push_back(v + k);
    return fmt::format("w{0}, g{0}, b{0}, m{0}, v{0}, training", k);
  };
  std::vector<std::string> args;
  for (size_t i = 0; i < block.convs.size(); ++i) args.push_back(group(std::to_string(i + 1)));
  const std::string down_args = block.has_down ? group("d") : "";
  params.push_back("training");
  std::string text = wrap(fmt::format("def {}(", block.helper), params, ") {\n", "    ");
  std::string h = "x";
  for (size_t i = 0; i + 1 < block.convs.size(); ++i) {
    text += fmt::format("  let h{} = relu({}({}, {}));\n", i + 1, conv_helper(block.convs[i]), h, args[i]);
    h = fmt::format("h{}", i + 1);
  }
  const std::string shortcut = block.has_down ? fmt::format("{}(x, {})", conv_helper(block.down), down_args) : "x";
  text += fmt::format("  return relu({}({}, {}) + {});\n}}\n", conv_helper(block.convs.back()), h, args.back(),
                      shortcut);
  return text;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// The whole network: stem, blocks, global average pool, classifier; `training` goes to every
// batch norm.
std::string network_helper(const Network& net) {
  std::string text = "def logits(x, training) {\n";
  std::vector<std::string> stem_args = variables(net.stem);
  stem_args.push_back("training");
  std::string stem = wrap(fmt::format("relu({}(x, ", conv_helper(net.stem)), stem_args, "))", "    ");
  if (net.stem_pool) stem = "max_pool2d(" + stem + ", 3, stride=2, padding=1)";
  text += "  let h0 = " + stem + ";\n";
  for (size_t i = 0; i < net.blocks.size(); ++i) {
    const Block& b = net.blocks[i];
    std::vector<std::string> args{fmt::format("h{}", i)};
    for (const ConvBn& c : b.convs) args.push_back(join(variables(c)));
    if (b.has_down) args.push_back(join(variables(b.down)));
    args.push_back("training");
    text += wrap(fmt::format("  let h{} = {}(", i + 1, b.helper), args, ");\n", "      ");
  }
  text += fmt::format("  return global_avg_pool(h{}) @ fc_w + fc_b;\n}}\n", net.blocks.size());
  return text;
}

void check(const Config& cfg) {
  bool known = false;
  for (int d : supported_depths()) known |= d == cfg.depth;
  if (!known)
    throw std::invalid_argument(
        fmt::format("depth {}: use 18, 34 or 50 (ImageNet style) or 20, 32, 44 or 56 (CIFAR style)", cfg.depth));
  if (cfg.image < 1 || cfg.channels < 1 || cfg.classes < 2)
    throw std::invalid_argument("the image size and channels must be at least 1 and the classes at least 2");
  if (cfg.pad_to != 0 && (cfg.pad_to < cfg.image || (cfg.pad_to - cfg.image) % 2 != 0))
    throw std::invalid_argument(fmt::format(
        "pad to {}: must be at least the image size {} and differ from it by an even number", cfg.pad_to, cfg.image));
  if (cfg.fashion && (cfg.image != 28 || cfg.channels != 1))
    throw std::invalid_argument("the Fashion-MNIST form takes 28x28 images with 1 channel");
  // ImageNet style halves the size five times (stem, pool, three stages); each halving rounds up.
  const int size = std::max(cfg.image, cfg.pad_to);
  if (imagenet_style(cfg.depth) && size < 32)
    throw std::invalid_argument(fmt::format("image size {}: the ImageNet-style depths need at least 32", size));
  if (!imagenet_style(cfg.depth) && size < 4)
    throw std::invalid_argument(fmt::format("image size {}: the CIFAR-style depths need at least 4", size));
}

// The minimised loss: the mean, plus weight decay's L2 term over the weights (names ending in _w).
std::string minimized_loss(const Config& cfg, const std::vector<std::string>& params) {
  if (cfg.weight_decay <= 0) return "mean(losses)";
  std::vector<std::string> squares;
  for (const std::string& p : params)
    if (p.size() > 2 && p.compare(p.size() - 2, 2, "_w") == 0) squares.push_back(fmt::format("sum({0} * {0})", p));
  return fmt::format("mean(losses) + {} * (\n{}", cfg.weight_decay / 2, wrap("      ", squares, ")", "      ", " + "));
}

// The per-row training losses of `input` against `labels`: cross-entropy, or with label smoothing
// e, (1 - e) * cross_entropy - e * mean(log_softmax) (the cross-entropy against the smoothed labels).
std::string train_losses(const Config& cfg, const std::string& input, const std::string& labels) {
  if (cfg.label_smoothing <= 0) return fmt::format("  let losses = cross_entropy(logits({}, true), {});\n", input, labels);
  return fmt::format("  let scores = logits({0}, true);\n  let losses = {1} * cross_entropy(scores, {2}) - {3} * "
                     "mean(log_softmax(scores), axis=1);\n",
                     input, 1 - cfg.label_smoothing, labels, cfg.label_smoothing);
}

std::string functions(const Config& cfg, const std::vector<std::string>& params) {
  const std::string images = cfg.fashion ? "u8[n, 784]" : fmt::format("f32[n, {0}, {1}, {1}]", cfg.channels, cfg.image);
  const std::string in = cfg.fashion ? "pixels(images)" : "images";
  const std::string train_in = cfg.flip ? "flipped(" + in + ")" : in;
  const std::string head = cfg.weight_decay > 0 ? fmt::format("  minimize {}\n    over ", minimized_loss(cfg, params))
                                                : std::string("  minimize mean(losses) over ");
  const std::string minimize = wrap(head, params, " using opt;\n", "    ");
  std::string text = fmt::format(
      "// One step's share on this rank: the mean loss over its rows (out: the sum, for the epoch's mean).\n"
      "fn train(scatter images: {0}, scatter labels: i64[n]) {{\n"
      "{1}  out loss_sum: sum = sum(losses);\n{2}}}\n\n",
      images, train_losses(cfg, train_in, "labels"), minimize);
  if (cfg.fashion)
    text += fmt::format(
        "// The training set, scattered once over the ranks, and the same step on the rows batch_s picks.\n"
        "shared train_images: u8[m, 784] sliceable;\nshared train_labels: i64[m] sliceable;\n\n"
        "fn train_device() {{\n{}  out loss_sum: sum = sum(losses);\n{}}}\n\n",
        train_losses(cfg, cfg.flip ? "flipped(pixels(train_images))" : "pixels(train_images)", "train_labels"),
        minimize);
  text += fmt::format(
      "// Loss and accuracy over a whole data set (one call with num_slices), with the running statistics.\n"
      "fn evaluate(scatter images: {}, scatter labels: i64[n]) {{\n  let scores = logits({}, false);\n"
      "  out loss: avg = mean(cross_entropy(scores, labels));\n"
      "  out accuracy: avg = mean(cast(argmax(scores, axis=1) == labels, f32));\n}}\n",
      images, in);
  return text;
}

std::string header(const Config& cfg, const Network& net, int convs) {
  const int size = std::max(cfg.image, cfg.pad_to);
  std::string text = fmt::format(
      "// ResNet-{} ({} style{}) for {}x{}x{} images{}, {} classes.\n"
      "// {} convolutions, each followed by batch norm, and a {}-to-{} classifier after global\n"
      "// average pooling. Generated by\n"
      "//   {}\n"
      "// (examples/resnet/resnet_model.cpp); edit the generator, not this file.\n",
      cfg.depth, imagenet_style(cfg.depth) ? "ImageNet" : "CIFAR",
      cfg.depth == 50 ? ", bottleneck blocks" : ", basic blocks", cfg.channels, cfg.image, cfg.image,
      cfg.pad_to > cfg.image ? fmt::format(" zero-padded to {}x{}", size, size) : "", cfg.classes, convs, net.features,
      cfg.classes, cfg.command.empty() ? "resnet_gen" : cfg.command);
  text +=
      "// Downsampling blocks take a 1x1 projection shortcut (with batch norm). Convolution weights are\n"
      "// He-normal (fan_out, as torchvision), batch norm starts at scale 1 and shift 0, the classifier\n"
      "// is uniform in +-1/sqrt(fan_in) (PyTorch's nn.Linear). Training normalises with each rank's\n"
      "// batch statistics and updates that rank's running statistics; evaluation uses the running ones.\n";
  if (cfg.pad_to > cfg.image)
    text += fmt::format(
        "// Zero padding to {0}x{0} is the stem's own padding: a 3x3 convolution with padding {1} on the\n"
        "// {2}x{2} image equals padding {1}-1 zeros around it and then a padding-1 convolution.\n",
        size, net.stem.padding, cfg.image);
  return text + "\n";
}

}  // namespace

bool imagenet_style(int depth) { return depth == 18 || depth == 34 || depth == 50; }

std::vector<int> supported_depths() { return {18, 34, 50, 20, 32, 44, 56}; }

std::string generate(const Config& cfg) {
  check(cfg);
  const Network net = layout(cfg);
  int seed = 1, convs = 1;
  std::string decls = declare(net.stem, seed);
  std::vector<std::string> params{"stem_w", "stem_g", "stem_b"};
  std::vector<ConvBn> kinds{net.stem};  // one conv-BN helper per kernel/stride/padding
  auto add = [&](const ConvBn& c) {
    decls += declare(c, seed);
    params.insert(params.end(), {c.name + "_w", c.name + "_g", c.name + "_b"});
    ++convs;
    bool seen = false;
    for (const ConvBn& k : kinds) seen |= conv_helper(k) == conv_helper(c);
    if (!seen) kinds.push_back(c);
  };
  std::vector<const Block*> block_kinds;
  for (const Block& b : net.blocks) {
    for (const ConvBn& c : b.convs) add(c);
    if (b.has_down) add(b.down);
    bool seen = false;
    for (const Block* k : block_kinds) seen |= k->helper == b.helper;
    if (!seen) block_kinds.push_back(&b);
  }
  const double bound = 1.0 / std::sqrt(double(net.features));
  decls += fmt::format(
      "shared fc_w: f32[{0}, {1}] = uniform(seed={2}, low={3:.9g}, high={4:.9g});\n"
      "shared fc_b: f32[{1}] = uniform(seed={5}, low={3:.9g}, high={4:.9g});\n",
      net.features, cfg.classes, seed, -bound, bound, seed + 1);
  params.insert(params.end(), {"fc_w", "fc_b"});

  std::string text = header(cfg, net, convs) + decls + "\n";
  text += fmt::format(
      "// The update rule (resnet_demo and the Fashion-MNIST trainer may replace it).\noptimizer opt = {};\n\n",
      cfg.optimizer);
  text += "// conv -> batch norm; with training=true it normalises with the batch statistics and updates\n"
          "// the running ones (passed in through its parameters), with false it uses the running ones.\n";
  for (const ConvBn& k : kinds) text += conv_bn_helper(k);
  text += "\n// Residual blocks: relu(main path + shortcut); `_down` halves the size, `_proj` only widens.\n";
  for (const Block* b : block_kinds) text += block_helper(*b);
  text += "\n";
  if (cfg.fashion)
    text +=
        "// Raw bytes [rows, 784] -> [rows, 1, 28, 28] in [0, 1].\n"
        "def pixels(images: u8[rows, 784]) {\n  return reshape(cast(images, f32) / 255, [rows, 1, 28, 28]);\n}\n\n";
  if (cfg.flip)
    text += fmt::format(
        "// Training images mirrored left to right, each with probability 1/2: take() of the reversed\n"
        "// columns on the width axis moved to the front.\n"
        "shared flip_ones: f32[{0}] = ones;\n"
        "def flipped(x) {{\n  let reversed = cast({0} - cumsum(flip_ones), i64);\n"
        "  let mirror = transpose(take(transpose(x, [3, 0, 1, 2]), reversed), [1, 2, 3, 0]);\n"
        "  return where(bernoulli_like(slice(slice(x, 0, 1, axis=2), 0, 1, axis=3), 0.5) > 0, mirror, x);\n}}\n\n",
        cfg.image);
  text += network_helper(net) + "\n";
  return text + functions(cfg, params);
}

}  // namespace resnet

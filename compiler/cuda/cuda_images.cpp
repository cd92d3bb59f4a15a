// Pre-built GPU images (cuda_images.h): the compatibility rule, the image checks, the --cuda-arch
// list and the build-time compile through NVRTC.
#include "compiler/cuda/cuda_images.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/errors.h"
#include "base/source_hash.h"
#include "compiler/cuda/nvrtc.h"

namespace synk::compiler {
namespace {

constexpr uint16_t kElfMachineCuda = 190;   // EM_CUDA

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// Why `image` cannot run on `device`; empty when it can.
std::string why_not(const CudaImage& image, const CudaDeviceProps& device) {
  const int sm = device.cc_major * 10 + device.cc_minor;
  if (device.driver_version > 0 && image.min_driver > device.driver_version)
    return image.ptx ? fmt::format("its PTX is newer than the driver (needs CUDA {}, the driver is {})",
                                   version_text(image.min_driver), version_text(device.driver_version))
                     : fmt::format("it needs a CUDA {} driver (the driver is {})", version_text(image.min_driver),
                                   version_text(device.driver_version));
  if (image.ptx)
    return image.sm <= sm ? "" : fmt::format("PTX for compute_{} runs only on compute capability {}.{} or newer",
                                             image.sm, image.sm / 10, image.sm % 10);
  if (image.arch_specific)
    return image.sm == sm ? "" : fmt::format("arch-specific code runs only on compute capability {}.{}", image.sm / 10,
                                             image.sm % 10);
  if (image.sm / 10 != device.cc_major)
    return fmt::format("CUBIN runs only on compute capability {}.x (same major version)", image.sm / 10);
  if (image.sm % 10 > device.cc_minor)
    return fmt::format("CUBIN runs only on compute capability {}.{} to {}.9", image.sm / 10, image.sm % 10, image.sm / 10);
  return "";
}

// Preference among fitting images: exact CUBIN, then newer CUBIN (by sm), then PTX (newest).
int rank_of(const CudaImage& image, int device_sm) {
  if (!image.ptx && image.sm == device_sm) return 3000 + (image.arch_specific ? 1 : 0);
  if (!image.ptx) return 2000 + image.sm;
  return 1000 + image.sm;
}

}  // namespace

std::string CudaImage::name() const {
  return ptx ? fmt::format("compute_{} ptx", sm) : fmt::format("sm_{}{} cubin", sm, arch_specific ? "a" : "");
}

std::string cuda_image_problem(const CudaImage& image) {
  const char* b = image.bytes();
  const size_t n = image.byte_count();
  if (!b || n == 0) return "it is empty";
  if (image.ptx) {
    if (b[n - 1] != '\0') return "the PTX text has no terminating NUL";
    const std::string_view text(b, n - 1);
    if (text.find(".version ") == std::string_view::npos || text.find(".target ") == std::string_view::npos)
      return "the PTX text has no .version/.target header";
    return "";
  }
  // An ELF64 little-endian object for the CUDA machine: e_ident (16 bytes), e_type, e_machine.
  if (n < 64 || std::memcmp(b, "\x7f" "ELF", 4) != 0) return "not an ELF file (no CUBIN magic)";
  if (b[4] != 2 || b[5] != 1) return "not a 64-bit little-endian ELF file";
  uint16_t machine = 0;
  std::memcpy(&machine, b + 18, sizeof machine);
  if (machine != kElfMachineCuda) return fmt::format("an ELF file for machine {}, not NVIDIA CUDA ({})", machine, kElfMachineCuda);
  // The architecture in e_flags: bits 8-15 since CUDA's ELF ABI version 8 (CUDA 12.8+ toolkits,
  // EI_ABIVERSION byte 8), the low byte before. A mismatch is a mislabelled image.
  uint32_t flags = 0;
  std::memcpy(&flags, b + 48, sizeof flags);
  const int elf_sm = uint8_t(b[8]) >= 8 ? int((flags >> 8) & 0xff) : int(flags & 0xff);
  if (elf_sm != 0 && elf_sm != image.sm)
    return fmt::format("the table says sm_{} but the CUBIN is for sm_{}", image.sm, elf_sm);
  return "";
}

size_t select_cuda_image(const CudaImageSet& set, const CudaDeviceProps& device) {
  const int sm = device.cc_major * 10 + device.cc_minor;
  int best = -1, best_rank = -1;
  std::vector<std::string> rejected;
  for (size_t i = 0; i < set.images.size(); ++i) {
    const CudaImage& image = set.images[i];
    if (std::string why = why_not(image, device); !why.empty()) {
      rejected.push_back(fmt::format("{}: {}", image.name(), why));
      continue;
    }
    if (int r = rank_of(image, sm); r > best_rank) {
      best = int(i);
      best_rank = r;
    }
  }
  const std::string device_text =
      fmt::format("{}compute capability {}.{}, driver {}", device.name.empty() ? "" : device.name + ", ", device.cc_major,
                  device.cc_minor, device.driver_version > 0 ? version_text(device.driver_version) : "unknown");
  if (best < 0)
    throw synk::UserError(fmt::format(
        "function '{}': the artifact has no GPU code for this device ({}): {}; rebuild it with "
        "synkc --cuda-arch={}{} (or run on the CPU backend)",
        set.function, device_text, rejected.empty() ? "it holds no GPU images" : fmt::format("{}", fmt::join(rejected, "; ")),
        sm, set.images.empty() ? "" : ", or update the driver if its PTX is newer"));
  const CudaImage& chosen = set.images[size_t(best)];
  if (std::string problem = cuda_image_problem(chosen); !problem.empty())
    throw synk::UserError(fmt::format("function '{}': the artifact's {} image for this device ({}) is corrupt: {}; "
                                     "rebuild the artifact",
                                     set.function, chosen.name(), device_text, problem));
  return size_t(best);
}

const std::vector<int>& default_cuda_archs() {
  static const std::vector<int> archs = {80, 90};
  return archs;
}

std::vector<int> parse_cuda_archs(const std::string& list, std::vector<bool>* arch_specific) {
  std::vector<int> archs;
  std::vector<bool> specific;
  if (list.empty() || list == "none") {
    if (arch_specific) arch_specific->clear();
    return archs;
  }
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    start = end + 1;
    std::string digits = item.rfind("sm_", 0) == 0 ? item.substr(3) : item;
    bool a = !digits.empty() && digits.back() == 'a';
    if (a) digits.pop_back();
    if (digits.size() < 2 || digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
      throw synk::UserError(fmt::format("--cuda-arch: '{}' is not a GPU architecture (write 80, sm_90, sm_90a, "
                                       "a comma-separated list, or none)", item));
    const int sm = std::stoi(digits);
    std::string reason;
    if (nvrtc_available(&reason)) {
      std::vector<int> known = nvrtc_supported_archs();
      if (!known.empty() && std::find(known.begin(), known.end(), sm) == known.end())
        throw synk::UserError(fmt::format("--cuda-arch: NVRTC {} cannot compile for sm_{} (it supports: {})",
                                         nvrtc_version(), sm, fmt::join(known, ", ")));
    }
    if (std::find(archs.begin(), archs.end(), sm) != archs.end())
      throw synk::UserError(fmt::format("--cuda-arch: sm_{} is listed twice", sm));
    archs.push_back(sm);
    specific.push_back(a);
  }
  if (arch_specific) *arch_specific = specific;
  return archs;
}

CudaImageSet compile_cuda_images(const std::string& source, const std::string& name_hint, const std::vector<int>& archs,
                                 const std::vector<bool>& arch_specific, bool use_disk_cache) {
  CudaImageSet set;
  set.function = name_hint;
  set.source_hash = source_hash(source);
  if (archs.empty()) return set;
  const std::string version = nvrtc_version();   // UserError when NVRTC cannot be loaded
  const int major = std::stoi(version), minor = std::stoi(version.substr(version.find('.') + 1));
  // A CUBIN loads on any driver of the toolkit's major version (minor-version compatibility); PTX
  // needs a driver that knows the toolkit's PTX ISA.
  auto add = [&](const CudaTarget& target) {
    CachedCudaBinary bin = nvrtc_compile_cached(source, name_hint, target, nvrtc_options_from_env(), use_disk_cache);
    CudaImage image;
    image.sm = target.sm;
    image.ptx = !target.cubin;
    image.arch_specific = target.arch_specific;
    image.min_driver = target.cubin ? major * 1000 : major * 1000 + minor * 10;
    image.owned = std::move(bin.binary.image);
    set.images.push_back(std::move(image));
  };
  int newest = 0;
  for (size_t i = 0; i < archs.size(); ++i) {
    const bool a = i < arch_specific.size() && arch_specific[i];
    add(CudaTarget{archs[i], true, a});
    newest = std::max(newest, archs[i]);
  }
  add(CudaTarget{newest, false, false});
  return set;
}

}  // namespace synk::compiler

// Pre-built GPU code for one function (what `synkc` puts into an artifact): CUBIN images for a
// list of architectures plus PTX for forward compatibility, and the choice among them for a
// device, made from recorded device properties only (compute capability, driver version), so
// that the rule and its errors are tested without a GPU. The images are compiled at build time
// by compile_cuda_images() (NVRTC, which runs ptxas for each CUBIN); at run time the chosen image
// goes to cuModuleLoadDataEx (the driver JIT-compiles PTX), and NVRTC is never loaded.
//
// The compatibility rule (docs/gpu.md, "Ahead-of-time GPU code"):
// - a CUBIN for sm_XY runs on a device of compute capability X.Z when Z >= Y (same major
//   version); never across majors. Arch-specific targets ('a' suffix, sm_90a) run only on
//   exactly that compute capability.
// - PTX for compute_XY is JIT-compiled by the driver for any device of compute capability >= X.Y,
//   when the driver knows the PTX ISA (driver version >= the toolkit that wrote the PTX).
// Preference: a CUBIN of exactly the device's architecture, then the newest compatible CUBIN of
// the same major, then the newest compatible PTX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace synk::compiler {

// One image; `data` points to static bytes (the artifact's embedded data) or to `owned`.
struct CudaImage {
  int sm = 0;                    // 80 for sm_80 / compute_80
  bool ptx = false;              // false: CUBIN (ELF)
  bool arch_specific = false;    // sm_90a: runs only on compute capability 9.0
  int min_driver = 0;            // CUDA driver version it needs (13000 = 13.0)
  const char* data = nullptr;    // CUBIN bytes, or PTX text (NUL-terminated)
  size_t size = 0;
  std::vector<char> owned;       // bytes held by this object (images compiled in process)

  std::string name() const;      // "sm_80 cubin", "sm_90a cubin", "compute_90 ptx"
  const char* bytes() const { return owned.empty() ? data : owned.data(); }
  size_t byte_count() const { return owned.empty() ? size : owned.size(); }
};

// Every image of one function, and the hash of the CUDA source they were compiled from (the
// runtime regenerates the source and compares, like the CPU kernels' hash).
struct CudaImageSet {
  std::string function;
  uint64_t source_hash = 0;
  std::vector<CudaImage> images;
};

// What the choice needs to know about a device (recorded, so tests fake it).
struct CudaDeviceProps {
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;        // cuDriverGetVersion: 13000 for CUDA 13.0; 0 = unknown (not checked)
  std::string name;              // for messages ("NVIDIA H100 80GB HBM3"); may be empty
};

// Index into set.images of the image to load on `device`. Throws synk::UserError when none fits
// (naming the device, its driver and every image with why it does not fit, and what to rebuild
// with), or when the chosen image is corrupt (not an ELF CUBIN for the CUDA machine, or PTX without
// its .version/.target header or terminating NUL).
size_t select_cuda_image(const CudaImageSet& set, const CudaDeviceProps& device);

// The checks select_cuda_image applies to a candidate: empty when `image` looks like what it
// claims to be, else what is wrong.
std::string cuda_image_problem(const CudaImage& image);

// The architectures `synkc` builds for when not told (sm_80 and sm_90).
const std::vector<int>& default_cuda_archs();
// "80,90", "sm_80,sm_90a", "90" -> architectures; "none" or "" -> none. Throws synk::UserError
// naming an entry that is not an architecture NVRTC can compile for (when NVRTC is loadable), or
// is malformed. `arch_specific` receives, per architecture, whether it had the 'a' suffix.
std::vector<int> parse_cuda_archs(const std::string& list, std::vector<bool>* arch_specific);

// NVRTC: a CUBIN per architecture and PTX for the newest (compute_<newest>), for `source`.
// Reads and fills the on-disk kernel cache (use_disk_cache false: always compiles, still stores).
// Throws synk::UserError when NVRTC cannot be loaded.
CudaImageSet compile_cuda_images(const std::string& source, const std::string& name_hint, const std::vector<int>& archs,
                                 const std::vector<bool>& arch_specific = {}, bool use_disk_cache = true);

}  // namespace synk::compiler

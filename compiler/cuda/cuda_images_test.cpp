// The load path of ahead-of-time GPU code without a GPU: which image select_cuda_image picks for
// recorded device properties (a fake device: compute capability and driver version), the SASS and
// PTX compatibility rule, and its errors (no image for this device, a corrupt image, PTX newer
// than the driver); the --cuda-arch list; and, with NVRTC, that compile_cuda_images writes a
// valid CUBIN for every listed architecture plus PTX of the newest.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "base/errors.h"
#include "compiler/cuda/cuda_images.h"
#include "compiler/cuda/nvrtc.h"

namespace synk::compiler {
namespace {

// A minimal CUBIN header (ELF64, EM_CUDA, ABI version 8: the architecture in e_flags bits 8-15).
CudaImage fake_cubin(int sm, bool arch_specific = false, int min_driver = 13000) {
  CudaImage image;
  image.sm = sm;
  image.arch_specific = arch_specific;
  image.min_driver = min_driver;
  image.owned.assign(64, '\0');
  std::memcpy(image.owned.data(), "\x7f" "ELF", 4);
  image.owned[4] = 2;   // ELFCLASS64
  image.owned[5] = 1;   // little-endian
  image.owned[8] = 8;   // CUDA ELF ABI version
  const uint16_t machine = 190;
  std::memcpy(image.owned.data() + 18, &machine, 2);
  const uint32_t flags = uint32_t(sm) << 8;
  std::memcpy(image.owned.data() + 48, &flags, 4);
  return image;
}

CudaImage fake_ptx(int sm, int min_driver = 13000) {
  CudaImage image;
  image.sm = sm;
  image.ptx = true;
  image.min_driver = min_driver;
  const std::string text = ".version 9.0\n.target sm_" + std::to_string(sm) + "\n.address_size 64\n";
  image.owned.assign(text.begin(), text.end());
  image.owned.push_back('\0');
  return image;
}

// What synkc builds by default: sm_80 and sm_90 CUBINs, compute_90 PTX (CUDA 13.0).
CudaImageSet default_set() {
  CudaImageSet set;
  set.function = "synk_f";
  set.images.push_back(fake_cubin(80));
  set.images.push_back(fake_cubin(90));
  set.images.push_back(fake_ptx(90, 13000));
  return set;
}

CudaDeviceProps device(int major, int minor, int driver = 13000) { return {major, minor, driver, ""}; }

std::string chosen(const CudaImageSet& set, const CudaDeviceProps& d) { return set.images.at(select_cuda_image(set, d)).name(); }

std::string error_of(const CudaImageSet& set, const CudaDeviceProps& d) {
  try {
    select_cuda_image(set, d);
  } catch (const synk::UserError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaImages, ExactCubinFirst) {
  EXPECT_EQ(chosen(default_set(), device(8, 0)), "sm_80 cubin");
  EXPECT_EQ(chosen(default_set(), device(9, 0)), "sm_90 cubin");   // not the PTX
}

TEST(CudaImages, CubinRunsOnHigherMinorOfTheSameMajor) {
  EXPECT_EQ(chosen(default_set(), device(8, 6)), "sm_80 cubin");   // A10/RTX 30xx
  EXPECT_EQ(chosen(default_set(), device(8, 9)), "sm_80 cubin");   // L4/L40
  CudaImageSet set = default_set();
  set.images.insert(set.images.begin(), fake_cubin(86));
  EXPECT_EQ(chosen(set, device(8, 9)), "sm_86 cubin");             // the newest that fits
  EXPECT_EQ(chosen(set, device(8, 0)), "sm_80 cubin");             // never a higher minor
}

TEST(CudaImages, NewerMajorTakesThePtx) {
  EXPECT_EQ(chosen(default_set(), device(10, 0)), "compute_90 ptx");   // B200: no SASS across majors
  EXPECT_EQ(chosen(default_set(), device(12, 0)), "compute_90 ptx");
}

TEST(CudaImages, ArchSpecificCubinRunsOnlyOnItsOwnArchitecture) {
  CudaImageSet set;
  set.function = "synk_f";
  set.images.push_back(fake_cubin(90, true));
  set.images.push_back(fake_ptx(90));
  EXPECT_EQ(chosen(set, device(9, 0)), "sm_90a cubin");
  set.images.pop_back();
  std::string e = error_of(set, device(10, 0));
  EXPECT_NE(e.find("sm_90a cubin: arch-specific code runs only on compute capability 9.0"), std::string::npos) << e;
}

TEST(CudaImages, NoImageForThisDeviceSaysWhyAndWhatToRebuildWith) {
  CudaImageSet set;
  set.function = "synk_f";
  set.images.push_back(fake_cubin(90));
  std::string e = error_of(set, device(8, 6));
  EXPECT_NE(e.find("function 'synk_f': the artifact has no GPU code for this device (compute capability 8.6, driver 13.0)"),
            std::string::npos) << e;
  EXPECT_NE(e.find("sm_90 cubin: CUBIN runs only on compute capability 9.x"), std::string::npos) << e;
  EXPECT_NE(e.find("synkc --cuda-arch=86"), std::string::npos) << e;
  // Older than every image, PTX included: PTX only JITs forward.
  e = error_of(default_set(), device(7, 5));
  EXPECT_NE(e.find("compute_90 ptx: PTX for compute_90 runs only on compute capability 9.0 or newer"), std::string::npos)
      << e;
  CudaImageSet empty;
  empty.function = "synk_g";
  EXPECT_NE(error_of(empty, device(9, 0)).find("it holds no GPU images"), std::string::npos);
}

TEST(CudaImages, PtxNewerThanTheDriverIsRefused) {
  // A CUDA 12.8 driver on a Blackwell: no CUBIN of its major, and the CUDA 13.0 PTX it cannot JIT.
  std::string e = error_of(default_set(), device(10, 0, 12080));
  EXPECT_NE(e.find("compute_90 ptx: its PTX is newer than the driver (needs CUDA 13.0, the driver is 12.8)"),
            std::string::npos) << e;
  EXPECT_NE(e.find("update the driver"), std::string::npos) << e;
  // A driver of an older major cannot load the CUBINs either (minor-version compatibility only).
  e = error_of(default_set(), device(9, 0, 12080));
  EXPECT_NE(e.find("sm_90 cubin: it needs a CUDA 13.0 driver (the driver is 12.8)"), std::string::npos) << e;
  // Driver version unknown (0): not checked.
  EXPECT_EQ(chosen(default_set(), device(10, 0, 0)), "compute_90 ptx");
  // A newer driver than the toolkit: fine.
  EXPECT_EQ(chosen(default_set(), device(10, 0, 13020)), "compute_90 ptx");
}

TEST(CudaImages, CorruptImagesAreNamed) {
  CudaImageSet set = default_set();
  set.images[1].owned[1] = 'X';   // the sm_90 CUBIN's magic
  std::string e = error_of(set, device(9, 0));
  EXPECT_NE(e.find("function 'synk_f': the artifact's sm_90 cubin image for this device (compute capability 9.0, "
                   "driver 13.0) is corrupt: not an ELF file (no CUBIN magic)"), std::string::npos) << e;
  set = default_set();
  set.images[1].owned[18] = 62;   // EM_X86_64
  EXPECT_NE(error_of(set, device(9, 0)).find("an ELF file for machine 62, not NVIDIA CUDA (190)"), std::string::npos);
  set = default_set();
  set.images[1] = fake_cubin(80);
  set.images[1].sm = 90;         // mislabelled
  EXPECT_NE(error_of(set, device(9, 0)).find("the table says sm_90 but the CUBIN is for sm_80"), std::string::npos);
  set = default_set();
  set.images[0].owned.resize(10);  // truncated
  EXPECT_NE(error_of(set, device(8, 0)).find("not an ELF file"), std::string::npos);
  set = default_set();
  set.images[2].owned.pop_back();  // PTX without its NUL
  EXPECT_NE(error_of(set, device(10, 0)).find("the PTX text has no terminating NUL"), std::string::npos);
  set = default_set();
  set.images[2].owned = {'x', '\0'};
  EXPECT_NE(error_of(set, device(10, 0)).find("no .version/.target header"), std::string::npos);
}

TEST(CudaImages, ArchListParses) {
  std::vector<bool> specific;
  EXPECT_EQ(parse_cuda_archs("80,sm_90a", &specific), (std::vector<int>{80, 90}));
  EXPECT_EQ(specific, (std::vector<bool>{false, true}));
  EXPECT_TRUE(parse_cuda_archs("none", &specific).empty());
  for (const char* bad : {"sm90", "9", "80,,90", "compute_90", "sm_8x"}) {
    try {
      parse_cuda_archs(bad, &specific);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const synk::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--cuda-arch"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_cuda_archs("80,80", &specific), synk::UserError);
  std::string reason;
  if (nvrtc_available(&reason)) {
    try {
      parse_cuda_archs("70", &specific);   // NVRTC 13 dropped Volta
      ADD_FAILURE() << "sm_70 was accepted";
    } catch (const synk::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot compile for sm_70"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaImages, NvrtcBuildsACubinPerArchitectureAndPtxOfTheNewest) {
  std::string reason;
  if (!nvrtc_available(&reason)) GTEST_SKIP() << "NVRTC cannot be loaded: " << reason;
  const std::string source = "extern \"C\" __global__ void synk_t_k0(float* out) { out[threadIdx.x] = 2.0f; }\n";
  CudaImageSet set = compile_cuda_images(source, "synk_t", {80, 90}, {false, true});
  ASSERT_EQ(set.images.size(), 3u);
  EXPECT_EQ(set.images[0].name(), "sm_80 cubin");
  EXPECT_EQ(set.images[1].name(), "sm_90a cubin");
  EXPECT_EQ(set.images[2].name(), "compute_90 ptx");
  for (const CudaImage& image : set.images) EXPECT_EQ(cuda_image_problem(image), "") << image.name();
  EXPECT_EQ(chosen(set, device(8, 9)), "sm_80 cubin");
  EXPECT_EQ(chosen(set, device(9, 0)), "sm_90a cubin");
  EXPECT_EQ(chosen(set, device(10, 0)), "compute_90 ptx");
}

}  // namespace
}  // namespace synk::compiler

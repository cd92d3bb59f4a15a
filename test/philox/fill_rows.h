// The random fill that the tests compare across settings: the host build (philox_test.cpp), the
// freestanding CPU-kernel build (freestanding_kernels.cpp) and the CUDA build (cuda_kernels.cu)
// all compile this same text, one loop per distribution as a generated kernel has, so that the
// CPU builds can vectorise it. The includer defines FILL_FN (the function qualifier) and
// FILL_LOOP(e), the loop over the elements of one row that it handles: all of them on the CPU, a
// strided share per thread on the GPU, bounded by `cols`. philox.h and fs_abi.h come first.
FILL_FN void fill_row(const FsRequest* rq, synk_rng_stream s, uint64_t row, const void* xv, void* ov) {
  // Locals, not rq->...: the stores through out could alias *rq, which would stop vectorisation.
  const uint64_t cols = rq->cols, base = (row - rq->row0) * cols;
  const double a = rq->a, b = rq->b;
  const uint32_t thr = synk_rng_threshold24(a);
  switch (rq->kind) {
    case FS_UNIFORM_F32: {
      float* out = (float*)ov + base;
      const float low = (float)a, high = (float)b;
      FILL_LOOP(e) out[e] = synk_rng_uniform_at_f32(s, row, e, low, high);
      break;
    }
    case FS_UNIFORM_F64: {
      double* out = (double*)ov + base;
      FILL_LOOP(e) out[e] = synk_rng_uniform_at_f64(s, row, e, a, b);
      break;
    }
    case FS_NORMAL_F32: {
      float* out = (float*)ov + base;
      const float mean = (float)a, std = (float)b;
      FILL_LOOP(e) out[e] = synk_rng_normal_at_f32(s, row, e, mean, std);
      break;
    }
    case FS_NORMAL_F64: {
      double* out = (double*)ov + base;
      FILL_LOOP(e) out[e] = synk_rng_normal_at_f64(s, row, e, a, b);
      break;
    }
    case FS_BERNOULLI: {
      uint8_t* out = (uint8_t*)ov + base;
      FILL_LOOP(e) out[e] = synk_rng_bernoulli_at(s, row, e, thr) ? 1 : 0;
      break;
    }
    case FS_DROPOUT_F32: {
      const float* x = (const float*)xv + base;
      float* out = (float*)ov + base;
      const float scale = synk_rng_dropout_scale_f32((float)a);
      FILL_LOOP(e) out[e] = synk_rng_dropout_at_f32(s, row, e, thr, x[e], scale);
      break;
    }
    case FS_DROPOUT_F64: {
      const double* x = (const double*)xv + base;
      double* out = (double*)ov + base;
      const double scale = synk_rng_dropout_scale_f64(a);
      FILL_LOOP(e) out[e] = synk_rng_dropout_at_f64(s, row, e, thr, x[e], scale);
      break;
    }
  }
}

// vml_first_call_probe [--set-up]: one fresh process's first elementwise
// LibTorch call served by MKL's VML (cos of a seeded [230, 230] float32
// tensor, 2 intra-op threads), compared with the same call made again.
// --set-up first runs models::SetUpMklForReproducibleDecodes as the daemon's
// main() does. Exit status: 0 the two calls gave the same bytes, 3 they
// did not, 1 LibTorch threw. Used by vml_first_call_test.sh.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>

#include "daemon/models/mkl_reproducibility.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--set-up") == 0) {
    (void)vaed::models::SetUpMklForReproducibleDecodes();
  }
  try {
    at::set_num_threads(2);
    torch::Generator g = at::detail::createCPUGenerator(5);
    const torch::Tensor s = torch::randn({230, 230}, g, torch::kFloat);
    // A decode's work before its first VML call: MKL's sgemm, oneDNN's
    // convolution and LibTorch's own kernels on 2 threads (the race was
    // seen after them).
    const torch::Tensor x = torch::randn({1, 230, 128}, g, torch::kFloat);
    const torch::Tensor z = torch::randn({1, 24, 3, 4, 4}, g, torch::kFloat);
    for (int i = 0; i < 3; ++i) {
      (void)torch::linear(x, torch::randn({384, 128}, g, torch::kFloat));
      (void)torch::mm(s, s);
      (void)torch::softmax(s, -1);
      (void)torch::silu(s);
      (void)torch::layer_norm(x, {128});
      (void)torch::conv3d(z, torch::randn({128, 24, 1, 2, 2}, g, torch::kFloat), {}, {1, 2, 2});
    }
    const torch::Tensor first = s.cos();
    const torch::Tensor second = s.cos();
    if (torch::equal(first, second)) return 0;
    std::printf("first cos differs from the second by up to %g\n",
                (first - second).abs().max().item<double>());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vml_first_call_probe: %s\n", e.what());
    return 1;
  }
}

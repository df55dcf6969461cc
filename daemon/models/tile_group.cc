#include "daemon/models/tile_group.h"

#include <algorithm>
#include <chrono>

namespace vaed::models {

namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<torch::Tensor> GatherTiles(
    TileGroup& group, int64_t count, const std::function<std::vector<int64_t>(int64_t)>& tile_shape,
    const std::vector<torch::Tensor>& mine, const torch::Device& device,
    TileCommunicationStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const int size = group.size();
  const int rank = group.rank();
  // Elements each rank sends (from the shared plan, no exchange needed).
  std::vector<int64_t> elements(static_cast<size_t>(size), 0);
  for (int64_t i = 0; i < count; ++i) elements[static_cast<size_t>(i % size)] += Numel(tile_shape(i));
  const int64_t padded = std::max<int64_t>(1, *std::max_element(elements.begin(), elements.end()));

  torch::Tensor packed =
      torch::zeros({padded}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  int64_t offset = 0;
  size_t next = 0;
  for (int64_t i = rank; i < count; i += size, ++next) {
    TORCH_CHECK(next < mine.size(), "GatherTiles: rank ", rank, " holds ", mine.size(),
                " tiles; the plan gives it more");
    const torch::Tensor& t = mine[next];
    const std::vector<int64_t> shape = tile_shape(i);
    TORCH_CHECK(t.sizes().vec() == shape && t.scalar_type() == torch::kFloat,
                "GatherTiles: tile ", i, " is ", t.sizes(), " ", t.scalar_type(),
                "; the plan says float32 ", c10::IntArrayRef(shape));
    packed.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
    offset += t.numel();
  }
  TORCH_CHECK(next == mine.size(), "GatherTiles: rank ", rank, " holds ", mine.size(),
              " tiles; the plan gives it ", next);

  std::vector<torch::Tensor> parts = group.GatherToOutputRank(packed);
  std::vector<torch::Tensor> all;
  if (rank == 0) {
    TORCH_CHECK(static_cast<int>(parts.size()) == size, "GatherTiles: the gather returned ",
                parts.size(), " buffers for ", size, " ranks");
    all.resize(static_cast<size_t>(count));
    std::vector<int64_t> offsets(static_cast<size_t>(size), 0);
    for (int64_t i = 0; i < count; ++i) {
      const int r = static_cast<int>(i % size);
      if (r == 0) {
        all[static_cast<size_t>(i)] = mine[static_cast<size_t>(i / size)];
        continue;
      }
      const std::vector<int64_t> shape = tile_shape(i);
      const int64_t n = Numel(shape);
      all[static_cast<size_t>(i)] =
          parts[static_cast<size_t>(r)].narrow(0, offsets[static_cast<size_t>(r)], n).view(shape);
      offsets[static_cast<size_t>(r)] += n;
    }
  }
  if (stats != nullptr) {
    stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats->collectives;
    stats->tiles_decoded_here += static_cast<int64_t>(mine.size());
  }
  return all;
}

}  // namespace vaed::models

#include "ops/common/audio_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

namespace vaed::ops {
namespace {

static_assert(std::numeric_limits<float>::is_iec559, "WAV float samples are IEEE 754 binary32");

constexpr uint16_t kWaveFormatPcm = 0x0001;
constexpr uint16_t kWaveFormatIeeeFloat = 0x0003;
constexpr uint16_t kWaveFormatExtensible = 0xFFFE;

// The KSDATAFORMAT_SUBTYPE_* GUIDs of WAVE_FORMAT_EXTENSIBLE are this GUID
// with the format tag in the first two bytes (in its on-disk byte order).
constexpr std::array<uint8_t, 14> kSubFormatGuidTail = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                                        0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

constexpr double kPcm16Scale = 32767.0;

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// Appends little-endian fields to a byte buffer.
class LeWriter {
 public:
  void Tag(std::string_view four_cc) {
    bytes_.insert(bytes_.end(), four_cc.begin(), four_cc.end());
  }
  void U16(uint16_t v) {
    bytes_.push_back(static_cast<uint8_t>(v));
    bytes_.push_back(static_cast<uint8_t>(v >> 8));
  }
  void U32(uint32_t v) {
    U16(static_cast<uint16_t>(v));
    U16(static_cast<uint16_t>(v >> 16));
  }
  void Bytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(LoadU16(p)) | (static_cast<uint32_t>(LoadU16(p + 2)) << 16);
}

// The errno text through the one errno adapter, but always kIoError: to a
// caller of WriteWav every failure to produce the file is the same kind.
Status WriteError(int err, const std::string& context) {
  return IoError(ErrnoStatus(err, context).message());
}

// The RIFF header, fmt chunk, fact chunk (float only) and data chunk header
// for `audio` in `format`. Preconditions: CheckPlanarAudio(audio) is OK and
// the sizes fit in 32 bits.
std::vector<uint8_t> WavHeader(const PlanarAudio& audio, WavSampleFormat format, uint32_t riff_size,
                               uint32_t data_bytes) {
  const bool is_float = format == WavSampleFormat::kFloat32;
  const uint16_t format_tag = is_float ? kWaveFormatIeeeFloat : kWaveFormatPcm;
  const uint16_t bits = is_float ? 32 : 16;
  const auto channels = static_cast<uint16_t>(audio.channels);
  const auto block_align = static_cast<uint16_t>(channels * (bits / 8));
  const bool extensible = audio.channels > 2;

  LeWriter w;
  w.Tag("RIFF");
  w.U32(riff_size);
  w.Tag("WAVE");
  w.Tag("fmt ");
  // PCM has the 16-byte WAVEFORMAT layout; every other format has cbSize
  // (WAVEFORMATEX), and EXTENSIBLE 22 more bytes after it.
  w.U32(extensible ? 40 : (is_float ? 18 : 16));
  w.U16(extensible ? kWaveFormatExtensible : format_tag);
  w.U16(channels);
  w.U32(static_cast<uint32_t>(audio.sample_rate_hz));
  w.U32(static_cast<uint32_t>(audio.sample_rate_hz) * block_align);  // bytes per second
  w.U16(block_align);
  w.U16(bits);
  if (extensible) {
    w.U16(22);    // cbSize
    w.U16(bits);  // valid bits per sample
    w.U32(0);     // channel mask: no speaker positions claimed
    w.U16(format_tag);
    w.Bytes(kSubFormatGuidTail);
  } else if (is_float) {
    w.U16(0);  // cbSize
  }
  if (is_float) {
    w.Tag("fact");
    w.U32(4);
    w.U32(static_cast<uint32_t>(audio.samples));  // sample frames per channel
  }
  w.Tag("data");
  w.U32(data_bytes);
  return std::move(w.bytes());
}

int64_t HeaderBytes(const PlanarAudio& audio, WavSampleFormat format) {
  const bool is_float = format == WavSampleFormat::kFloat32;
  const int64_t fmt_body = audio.channels > 2 ? 40 : (is_float ? 18 : 16);
  return 12 + 8 + fmt_body + (is_float ? 12 : 0) + 8;
}

// Converts one sample for the file, appending its bytes to `out`.
void AppendSample(float x, WavSampleFormat format, WavWriteStats& stats,
                  std::vector<uint8_t>& out) {
  const bool nan = std::isnan(x);
  const bool out_of_range = !nan && (x < -1.0f || x > 1.0f);
  stats.nan_samples += nan ? 1 : 0;
  stats.out_of_range_samples += out_of_range ? 1 : 0;
  if (format == WavSampleFormat::kFloat32) {
    const auto u = std::bit_cast<uint32_t>(x);
    for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<uint8_t>(u >> shift));
    return;
  }
  const float clamped = nan ? 0.0f : std::clamp(x, -1.0f, 1.0f);
  // float * 32767 is exact in double; std::round rounds half away from zero.
  const auto code = static_cast<int16_t>(std::round(static_cast<double>(clamped) * kPcm16Scale));
  const auto u = static_cast<uint16_t>(code);
  out.push_back(static_cast<uint8_t>(u));
  out.push_back(static_cast<uint8_t>(u >> 8));
}

}  // namespace

Status CheckPlanarAudio(const PlanarAudio& audio) {
  if (audio.channels < 1 || audio.channels > kMaxAudioChannels) {
    return InvalidArgument("audio: channels must be in [1, " + std::to_string(kMaxAudioChannels) +
                           "], got " + std::to_string(audio.channels));
  }
  if (audio.samples <= 0) {
    return InvalidArgument("audio: samples per channel must be positive, got " +
                           std::to_string(audio.samples));
  }
  if (audio.sample_rate_hz < kMinAudioSampleRateHz ||
      audio.sample_rate_hz > kMaxAudioSampleRateHz) {
    return InvalidArgument(
        "audio: sample_rate_hz must be in [" + std::to_string(kMinAudioSampleRateHz) + ", " +
        std::to_string(kMaxAudioSampleRateHz) + "], got " + std::to_string(audio.sample_rate_hz));
  }
  // Compared by division first so that a huge `samples` cannot overflow.
  const auto channels = static_cast<uint64_t>(audio.channels);
  const auto samples = static_cast<uint64_t>(audio.samples);
  if (samples > audio.data.size() / channels || audio.data.size() != channels * samples) {
    return InvalidArgument("audio: " + std::to_string(audio.data.size()) +
                           " floats given, channels*samples = " + std::to_string(audio.channels) +
                           "*" + std::to_string(audio.samples));
  }
  return Status::Ok();
}

Result<WavWriteStats> WriteWav(const PlanarAudio& audio, const std::string& path,
                               WavSampleFormat format) {
  VAED_RETURN_IF_ERROR(CheckPlanarAudio(audio));
  const int64_t bytes_per_sample = format == WavSampleFormat::kFloat32 ? 4 : 2;
  const int64_t header_bytes = HeaderBytes(audio, format);
  // channels <= 8 and samples <= data.size(), so these cannot overflow.
  const int64_t data_bytes = audio.channels * audio.samples * bytes_per_sample;
  const int64_t riff_size = header_bytes - 8 + data_bytes;
  if (riff_size > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument(
        "audio: " + std::to_string(audio.samples) + " samples x " + std::to_string(audio.channels) +
        " channels do not fit a WAV file (4 GiB RIFF size limit); writing " + path);
  }
  const std::vector<uint8_t> header =
      WavHeader(audio, format, static_cast<uint32_t>(riff_size), static_cast<uint32_t>(data_bytes));

  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (file == nullptr) return WriteError(errno, "creating " + path);
  // Only a regular file is removed after a failure: `path` may name a
  // device or a FIFO that is not ours to delete.
  struct stat st {};
  const bool regular = ::fstat(::fileno(file.get()), &st) == 0 && S_ISREG(st.st_mode);
  // Closes (and removes) the partial file; `err` is the errno of the failure.
  auto fail = [&](int err) {
    file.reset();
    if (regular) std::remove(path.c_str());
    return WriteError(err, "writing " + path);
  };

  if (std::fwrite(header.data(), 1, header.size(), file.get()) != header.size()) {
    return fail(errno);
  }
  WavWriteStats stats;
  // Interleaves a block of sample frames at a time to bound memory.
  constexpr int64_t kFramesPerBlock = 16384;
  std::vector<uint8_t> block;
  block.reserve(static_cast<size_t>(kFramesPerBlock * audio.channels * bytes_per_sample));
  for (int64_t begin = 0; begin < audio.samples; begin += kFramesPerBlock) {
    const int64_t end = std::min(audio.samples, begin + kFramesPerBlock);
    block.clear();
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t c = 0; c < audio.channels; ++c) {
        AppendSample(audio.data[static_cast<size_t>(c * audio.samples + t)], format, stats, block);
      }
    }
    if (std::fwrite(block.data(), 1, block.size(), file.get()) != block.size()) {
      return fail(errno);
    }
  }
  // fclose flushes the buffer; its failure (e.g. ENOSPC) is a failed write.
  if (std::fclose(file.release()) != 0) return fail(errno);
  return stats;
}

namespace {

// The reader's one error: the file is not a WAV file it can read.
Status NotReadableWav(const std::string& path, const std::string& why) {
  return InvalidArgument(path + ": not a readable WAV file: " + why);
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  std::vector<uint8_t> bytes;
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return ErrnoStatus(errno, "opening " + path);
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), file.get())) > 0) {
    bytes.insert(bytes.end(), buf, buf + n);
  }
  if (std::ferror(file.get())) return ErrnoStatus(errno, "reading " + path);
  return bytes;
}

// The bodies of the `fmt ` and `data` chunks, pointing into the file's bytes.
struct WavChunks {
  const uint8_t* fmt = nullptr;
  uint32_t fmt_size = 0;
  const uint8_t* data = nullptr;
  uint32_t data_size = 0;
};

// Checks the RIFF/WAVE header and walks the chunks inside the RIFF size.
Result<WavChunks> FindWavChunks(const std::vector<uint8_t>& bytes, const std::string& path) {
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 ||
      std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
    return NotReadableWav(path, "no RIFF/WAVE header");
  }
  const uint64_t riff_end = 8 + static_cast<uint64_t>(LoadU32(bytes.data() + 4));
  if (riff_end > bytes.size()) {
    return NotReadableWav(path, "truncated: the RIFF header declares " + std::to_string(riff_end) +
                                    " bytes, the file has " + std::to_string(bytes.size()));
  }
  WavChunks chunks;
  for (uint64_t pos = 12; pos < riff_end;) {
    if (riff_end - pos < 8) {
      return NotReadableWav(path, "truncated chunk header at byte " + std::to_string(pos));
    }
    const std::string id(reinterpret_cast<const char*>(bytes.data() + pos), 4);
    const uint32_t size = LoadU32(bytes.data() + pos + 4);
    const uint64_t body = pos + 8;
    if (size > riff_end - body) {
      return NotReadableWav(path, "chunk '" + id + "' at byte " + std::to_string(pos) +
                                      " declares " + std::to_string(size) + " bytes, only " +
                                      std::to_string(riff_end - body) + " remain");
    }
    if (id == "fmt ") {
      if (chunks.fmt != nullptr) return NotReadableWav(path, "more than one 'fmt ' chunk");
      chunks.fmt = bytes.data() + body;
      chunks.fmt_size = size;
    } else if (id == "data") {
      if (chunks.data != nullptr) return NotReadableWav(path, "more than one 'data' chunk");
      chunks.data = bytes.data() + body;
      chunks.data_size = size;
    }
    // Chunk bodies are padded to even sizes; a missing final pad byte is
    // tolerated (the loop ends either way).
    pos = body + size + (size & 1u);
  }
  if (chunks.fmt == nullptr) return NotReadableWav(path, "no 'fmt ' chunk");
  if (chunks.data == nullptr) return NotReadableWav(path, "no 'data' chunk");
  return chunks;
}

// What the `fmt ` chunk says about the samples in `data`.
struct WavLayout {
  WavSampleFormat format = WavSampleFormat::kPcm16;
  uint16_t channels = 0;
  uint32_t sample_rate = 0;
  uint16_t block_align = 0;  // bytes per sample frame (all channels)
  uint32_t bytes_per_sample = 0;
};

// Decodes the `fmt ` chunk (plain or WAVE_FORMAT_EXTENSIBLE) and checks it
// against itself and the data chunk's size.
Result<WavLayout> ParseWavLayout(const WavChunks& chunks, const std::string& path) {
  const uint8_t* fmt = chunks.fmt;
  if (chunks.fmt_size < 16) {
    return NotReadableWav(path,
                          "'fmt ' chunk has " + std::to_string(chunks.fmt_size) + " bytes, < 16");
  }
  uint16_t format_tag = LoadU16(fmt);
  WavLayout layout;
  layout.channels = LoadU16(fmt + 2);
  layout.sample_rate = LoadU32(fmt + 4);
  const uint32_t byte_rate = LoadU32(fmt + 8);
  layout.block_align = LoadU16(fmt + 12);
  const uint16_t bits = LoadU16(fmt + 14);
  if (format_tag == kWaveFormatExtensible) {
    if (chunks.fmt_size < 40 || LoadU16(fmt + 16) < 22) {
      return NotReadableWav(path, "WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk shorter than 40 bytes");
    }
    const uint8_t* guid = fmt + 24;
    if (std::memcmp(guid + 2, kSubFormatGuidTail.data(), kSubFormatGuidTail.size()) != 0) {
      return NotReadableWav(path, "WAVE_FORMAT_EXTENSIBLE with an unknown SubFormat GUID");
    }
    format_tag = LoadU16(guid);
  }
  if (format_tag == kWaveFormatPcm && bits == 16) {
    layout.format = WavSampleFormat::kPcm16;
  } else if (format_tag == kWaveFormatIeeeFloat && bits == 32) {
    layout.format = WavSampleFormat::kFloat32;
  } else {
    return NotReadableWav(path, "unsupported encoding: format tag " + std::to_string(format_tag) +
                                    " with " + std::to_string(bits) +
                                    " bits per sample (supported: 16-bit PCM, 32-bit float)");
  }
  layout.bytes_per_sample = bits / 8u;
  if (layout.channels == 0 || layout.block_align != layout.channels * layout.bytes_per_sample) {
    return NotReadableWav(path, "block_align " + std::to_string(layout.block_align) +
                                    " does not match " + std::to_string(layout.channels) +
                                    " channels of " + std::to_string(bits) + " bits");
  }
  if (byte_rate != static_cast<uint64_t>(layout.sample_rate) * layout.block_align) {
    return NotReadableWav(path, "byte rate " + std::to_string(byte_rate) + " is not sample rate " +
                                    std::to_string(layout.sample_rate) + " x block_align " +
                                    std::to_string(layout.block_align));
  }
  if (chunks.data_size % layout.block_align != 0) {
    return NotReadableWav(path, "data chunk of " + std::to_string(chunks.data_size) +
                                    " bytes is not a whole number of " +
                                    std::to_string(layout.block_align) + "-byte sample frames");
  }
  return layout;
}

}  // namespace

Result<WavAudio> ReadWav(const std::string& path) {
  VAED_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadWholeFile(path));
  VAED_ASSIGN_OR_RETURN(const WavChunks chunks, FindWavChunks(bytes, path));
  VAED_ASSIGN_OR_RETURN(const WavLayout layout, ParseWavLayout(chunks, path));

  WavAudio out;
  out.channels = layout.channels;
  out.samples = chunks.data_size / layout.block_align;
  out.sample_rate_hz = layout.sample_rate;
  out.format = layout.format;
  out.data.resize(static_cast<size_t>(out.channels * out.samples));
  if (Status s = CheckPlanarAudio(out.view()); !s.ok()) return s.WithContext(path);

  // Interleaved in the file, planar in WavAudio.
  for (int64_t t = 0; t < out.samples; ++t) {
    for (int64_t c = 0; c < out.channels; ++c) {
      const uint8_t* p = chunks.data + (t * out.channels + c) * layout.bytes_per_sample;
      float v;
      if (layout.format == WavSampleFormat::kFloat32) {
        v = std::bit_cast<float>(LoadU32(p));
      } else {
        v = static_cast<float>(static_cast<int16_t>(LoadU16(p)) / kPcm16Scale);
      }
      out.data[static_cast<size_t>(c * out.samples + t)] = v;
    }
  }
  return out;
}

}  // namespace vaed::ops

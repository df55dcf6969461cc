#include "vaed/framing.h"

#include <algorithm>
#include <string>

namespace vaed::wire {

namespace {

uint32_t ReadLength(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

}  // namespace

Result<std::string> EncodeFrame(std::string_view payload) {
  if (payload.size() > kMaxFramePayloadBytes) {
    return InvalidArgument("vaed message of " + std::to_string(payload.size()) +
                           " bytes is over the framing limit of 2^32-1");
  }
  const auto n = static_cast<uint32_t>(payload.size());
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

void FrameReader::Append(std::string_view chunk) {
  if (skip_ > 0) {
    // Inside an oversized payload: drop what belongs to it unbuffered.
    const uint64_t dropped = std::min<uint64_t>(skip_, chunk.size());
    skip_ -= dropped;
    chunk.remove_prefix(static_cast<size_t>(dropped));
  }
  if (chunk.empty()) return;
  if (offset_ > 0 && offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  buffer_.append(chunk);
}

std::optional<Frame> FrameReader::Next() {
  const size_t available = buffer_.size() - offset_;
  if (skip_ > 0 || available < kFrameHeaderBytes) return std::nullopt;
  const uint64_t length = ReadLength(buffer_.data() + offset_);
  Frame frame;
  if (length > max_payload_bytes_) {
    // Report it now; drop its payload as far as it is here, the rest as it
    // arrives.
    frame.oversized_bytes = length;
    offset_ += kFrameHeaderBytes;
    const uint64_t here = std::min<uint64_t>(length, buffer_.size() - offset_);
    offset_ += static_cast<size_t>(here);
    skip_ = length - here;
  } else {
    if (available - kFrameHeaderBytes < length) return std::nullopt;
    frame.payload.assign(buffer_, offset_ + kFrameHeaderBytes, static_cast<size_t>(length));
    offset_ += kFrameHeaderBytes + static_cast<size_t>(length);
  }
  // Keep the buffer from growing with consumed bytes, and give a large
  // message's capacity back once it is consumed (idle connections hold
  // nothing).
  if (offset_ == buffer_.size()) {
    if (buffer_.capacity() > (64u << 10)) {
      std::string().swap(buffer_);
    } else {
      buffer_.clear();
    }
    offset_ = 0;
  } else if (offset_ > (1u << 20) && offset_ * 2 > buffer_.size()) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  return frame;
}

}  // namespace vaed::wire

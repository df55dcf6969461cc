// Message framing on vaed's control channel.
//
// The channel is a raw ZeroMQ socket (vaed/raw_socket.h) on a Unix socket:
// ZeroMQ moves raw bytes and reports connects and disconnects, and vaed
// frames its own messages. Each message on the byte stream is
//
//   uint32 little-endian  length    (bytes that follow, 0 .. 2^32-1)
//   length bytes          payload   (a serialized vaed.v1.Request / Reply)
//
// Why not ZeroMQ's own messages: ZeroMQ caps each frame (ZMQ_MAXMSGSIZE)
// and counts its high-water marks in whole messages, so a peer that sends
// one endless multipart message makes the receiver buffer it all. Here the
// receiver decides from the 4-byte header, before buffering anything,
// whether a message is within its cap; bytes of a message over the cap
// are skipped as they arrive and never held (FrameReader). Memory per
// connection is then bounded by the cap plus ZeroMQ's receive window
// (ZMQ_RCVHWM chunks of at most ZMQ_IN_BATCH_SIZE bytes).
//
// Thread-safety: a FrameReader is used by one thread at a time.
#ifndef VAED_FRAMING_H_
#define VAED_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "vaed/status.h"

namespace vaed::wire {

inline constexpr size_t kFrameHeaderBytes = 4;
// The largest length the header can carry.
inline constexpr uint64_t kMaxFramePayloadBytes = UINT32_MAX;

// `payload` with its 4-byte header, ready for the stream. Errors:
// kInvalidArgument for a payload over kMaxFramePayloadBytes (messages are
// bounded far below, by server.max_message_bytes).
Result<std::string> EncodeFrame(std::string_view payload);

// One message taken off the stream.
struct Frame {
  // The payload; empty for an oversized message.
  std::string payload;
  // For a message over the reader's cap: its declared length in bytes. Its
  // payload is skipped as it arrives (never buffered), and the frame is
  // reported as soon as its header is read, so the sender can be answered
  // at once. 0 for a message within the cap.
  uint64_t oversized_bytes = 0;
};

// Reassembles messages from the chunks a stream delivers, in order. Holds
// at most the header and payload of one message within the cap, plus the
// unread rest of the last chunk appended.
class FrameReader {
 public:
  // `max_payload_bytes`: the largest payload taken in; longer messages come
  // out as oversized frames.
  explicit FrameReader(uint64_t max_payload_bytes) : max_payload_bytes_(max_payload_bytes) {}

  // Appends bytes received from the stream (any split: a chunk may end
  // inside a header, hold many messages, or be part of a skipped one).
  void Append(std::string_view chunk);

  // The next whole message (or oversized header), or nullopt until more
  // bytes arrive. Call until nullopt after each Append.
  std::optional<Frame> Next();

  // Bytes held now (for tests and limits).
  size_t buffered_bytes() const { return buffer_.size() - offset_; }
  // True between messages (no partial header or payload held, nothing
  // left to skip).
  bool at_boundary() const { return buffered_bytes() == 0 && skip_ == 0; }

 private:
  uint64_t max_payload_bytes_;
  std::string buffer_;
  size_t offset_ = 0;  // start of unread bytes in buffer_
  uint64_t skip_ = 0;  // payload bytes of an oversized message still to drop
};

}  // namespace vaed::wire

#endif  // VAED_FRAMING_H_

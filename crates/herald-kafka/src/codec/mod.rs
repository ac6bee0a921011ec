//! Sans-I/O Kafka wire codec: frame-length checks, request decoding (header,
//! guard walk, body) and response encoding that splices record bytes in
//! without copying them into the encoded message.

pub mod frame;
pub(crate) mod guard;
pub mod request;
pub mod response;

pub use frame::{check_frame_length, FrameError, LENGTH_PREFIX_BYTES};
pub use guard::GuardError;
pub use request::{decode_request, DecodeError, Request, RequestBody};
pub use response::{encode_response, Chunk, ResponseFrame, Spliced};

#[cfg(test)]
mod tests;

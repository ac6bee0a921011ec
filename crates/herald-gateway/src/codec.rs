//! The gRPC codec of the push service: prost's, with small starting
//! buffers. tonic gives every streaming call an encode and a decode buffer
//! of 8 KiB by default; a session mostly sits idle, so those two buffers
//! would be most of what an idle connection costs. They start at 512 bytes
//! here and grow as a message needs.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Bytes an encode or decode buffer starts with.
const START_BYTES: usize = 512;
/// Bytes encoded before a streaming response yields (tonic's default).
const YIELD_BYTES: usize = 32 * 1024;

/// prost's codec with small starting buffers; named by the generated code
/// (see `build.rs`).
#[derive(Debug)]
pub struct SessionCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SessionCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(START_BYTES, YIELD_BYTES)
}

impl<T, U> Codec for SessionCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}

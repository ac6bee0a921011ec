//! Compiles `proto/herald/v1/herald.proto` with protox, a protobuf compiler
//! written in Rust, so building herald needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let file = root.join("herald/v1/herald.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let descriptors = protox::compile([&file], [&root])?;
    tonic_prost_build::configure()
        .bytes(".")
        .codec_path("crate::codec::SessionCodec")
        .compile_fds(descriptors)?;
    Ok(())
}

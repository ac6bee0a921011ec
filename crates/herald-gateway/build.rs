//! Compiles `proto/herald/v1/herald.proto` with protox, a protobuf compiler
//! written in Rust, so building herald needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a build script
    // compiled for one checkout can be reused by another.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir).join("../../proto");
    let file = root.join("herald/v1/herald.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let descriptors = protox::compile([&file], [&root])?;
    tonic_prost_build::configure()
        .bytes(".")
        .codec_path("crate::codec::SessionCodec")
        .compile_fds(descriptors)?;
    Ok(())
}

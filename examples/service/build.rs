//! Compiles the example's own contract (`proto/`, outside the repository's `proto/` so that
//! it never reaches `noema-proto`, the production binary or its reflection) with protox,
//! and writes its descriptor set for reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let file = proto_root.join("noema/example/v1/example.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let mut compiler = protox::Compiler::new([&proto_root])?;
    compiler.include_imports(true);
    compiler.open_files([&file])?;
    let descriptors = compiler.file_descriptor_set();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("example_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}

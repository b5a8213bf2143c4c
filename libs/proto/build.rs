//! Compiles every contract under `proto/` with protox (pure Rust, no system `protoc`),
//! writes the encoded descriptor set for reflection, and derives the table of required
//! scopes from each RPC's `(noema.common.v1.required_scope)` option. An RPC without that
//! option fails the build, so no RPC can ship without an access rule.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prost_reflect::{DescriptorPool, Value};

fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

fn method_scopes(pool: &DescriptorPool) -> Result<String, String> {
    let option = pool
        .get_extension_by_name("noema.common.v1.required_scope")
        .ok_or("noema.common.v1.required_scope is not defined")?;
    let mut table = String::from(
        "/// `(gRPC path, required scope)` for every Noema RPC, from its `required_scope` option.\n\
         pub const METHOD_SCOPES: &[(&str, &str)] = &[\n",
    );
    for service in pool.services() {
        if !service.full_name().starts_with("noema.") {
            continue;
        }
        for method in service.methods() {
            let options = method.options();
            let scope = match options.get_extension(&option).as_ref() {
                Value::String(scope) if options.has_extension(&option) && !scope.is_empty() => {
                    scope.clone()
                }
                _ => {
                    return Err(format!(
                        "rpc {}.{} has no (noema.common.v1.required_scope) option",
                        service.full_name(),
                        method.name()
                    ));
                }
            };
            let _ = writeln!(
                table,
                "    (\"/{}/{}\", {:?}),",
                service.full_name(),
                method.name(),
                scope
            );
        }
    }
    table.push_str("];\n");
    Ok(table)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto").canonicalize()?;
    println!("cargo:rerun-if-changed={}", proto_root.display());

    let mut files = Vec::new();
    collect_protos(&proto_root, &mut files)?;
    files.sort();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }

    let mut compiler = protox::Compiler::new([&proto_root])?;
    compiler.include_imports(true);
    compiler.open_files(&files)?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("method_scopes.rs"),
        method_scopes(&compiler.descriptor_pool())?,
    )?;
    let descriptors = compiler.file_descriptor_set();
    std::fs::write(
        out_dir.join("noema_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}

//! Embeds every descriptor of the workspace's `schemes/` directory into the engine, so that
//! `pantheon` knows its schemes wherever it is installed.
use std::fmt::Write as _;

fn main() {
    // Read at run time, not `env!`: a build script compiled in another checkout (a shared
    // CARGO_TARGET_DIR) must still look in this one.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = std::path::Path::new(&manifest).join("../../schemes");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("schemes/ directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    let mut code = String::from("/// (file name, descriptor text) of every built-in scheme.\npub const BUILTIN: &[(&str, &str)] = &[\n");
    for p in entries {
        println!("cargo:rerun-if-changed={}", p.display());
        let abs = p.canonicalize().expect("canonical path");
        let _ = writeln!(
            code,
            "    ({:?}, include_str!({:?})),",
            p.file_name().unwrap().to_string_lossy(),
            abs.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_schemes.rs");
    std::fs::write(out, code).expect("write builtin_schemes.rs");
}

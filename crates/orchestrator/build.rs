//! Compiles the agent's and the daemon's protocols (`proto/agent.proto`,
//! `proto/testbed.proto`) with the protoc shipped in `protoc-bin-vendored` (no apt step).

fn main() {
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("protoc-bin-vendored has protoc");
    std::env::set_var("PROTOC", protoc);
    tonic_prost_build::compile_protos("proto/agent.proto").expect("compile proto/agent.proto");
    // The daemon's messages are also what `pantheon status|results --json` print.
    tonic_prost_build::configure()
        .type_attribute(".pantheon.testbed.v1", "#[derive(serde::Serialize)]")
        .compile_protos(&["proto/testbed.proto"], &["proto"])
        .expect("compile proto/testbed.proto");
}

//! What every Pantheon-rs program (`pantheon`, `pantheon-agent`, `pantheon-tunnel`) sets up
//! first: the libraries report warnings and progress through `tracing`, and the program prints
//! them. Part of the `cli` feature (the programs' dependencies), not of the library's core.

/// Prints every `tracing` message of level INFO and above as it is — one plain line on
/// stderr, without time, level or target — as the libraries' `eprintln!`s printed before.
/// Call once, first thing in `main`.
pub fn print_on_stderr() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .without_time()
        .with_level(false)
        .with_target(false)
        .init();
}

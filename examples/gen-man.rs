//! Regenerates the committed man pages from the clap definitions:
//! `cargo run --example gen-man` (writes man/*.1; `tests/man.rs` checks them).

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man"));
    match kvcr::man::write_all(&dir) {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
        }
        Err(e) => {
            eprintln!("gen-man: {}: {e}", dir.display());
            std::process::exit(1);
        }
    }
}

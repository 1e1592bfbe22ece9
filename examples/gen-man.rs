//! Regenerates the committed man pages and shell completions from the clap
//! definitions: `cargo run --example gen-man` (writes man/*.1 and
//! completions/*; `tests/it/man.rs` checks both). With a DIR argument, writes
//! the pages to DIR and the completions to DIR/completions.

#[path = "../tests/it/util/man.rs"]
mod man;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let arg = std::env::args_os().nth(1).map(std::path::PathBuf::from);
    let man = arg.clone().unwrap_or_else(|| root.join("man"));
    let completions = arg
        .map(|d| d.join("completions"))
        .unwrap_or_else(|| root.join("completions"));
    let written = man::write_all(&man)
        .map_err(|e| (man.clone(), e))
        .and_then(|mut p| {
            man::write_completions(&completions)
                .map(|c| {
                    p.extend(c);
                    p
                })
                .map_err(|e| (completions.clone(), e))
        });
    match written {
        Ok(paths) => {
            for p in paths {
                println!("{}", p.display());
            }
        }
        Err((dir, e)) => {
            eprintln!("gen-man: {}: {e}", dir.display());
            std::process::exit(1);
        }
    }
}

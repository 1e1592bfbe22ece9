use clap::Parser;

fn main() {
    let cli = kvcr::cli::Cli::parse();
    std::process::exit(kvcr::app::run(cli));
}

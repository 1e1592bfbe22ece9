fn main() {
    std::process::exit(kvcr::run());
}

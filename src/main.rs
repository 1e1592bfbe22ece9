fn main() {
    std::process::exit(kvcr_audit::run());
}

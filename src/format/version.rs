//! The version strings: `kvcr -V` prints [`VERSION`], `kvcr --version` the
//! long form with the build metadata `build.rs` records.

/// `X.Y.Z`, the package version: what reports carry as `kvcr_version`
/// (docs/format.md §9.4).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `kvcr --version` prints after `kvcr `: the git commit this binary
/// was built from (12 hex digits, or `unknown` outside a git checkout), the
/// build date (YYYY-MM-DD UTC, `SOURCE_DATE_EPOCH` when set) and the CUDA
/// header version the declarations of `src/io/cuda_ffi.rs` follow (the same
/// `cuda-NNNNN` the cudarc dev-dependency is built with, for the GPU proof's
/// owner); the driver itself is loaded at run time and may be newer.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("KVCR_GIT_COMMIT"),
    "\nbuilt: ",
    env!("KVCR_BUILD_DATE"),
    "\ncuda: ",
    env!("KVCR_CUDA_HEADERS"),
    " (driver API as declared in src/io/cuda_ffi.rs; libcuda loaded at run time, ",
    "unknown codes reported by number)"
);

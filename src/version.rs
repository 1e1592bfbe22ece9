//! The version strings: `kvcr -V` prints [`VERSION`], `kvcr --version` the
//! long form with the build metadata `build.rs` records.

/// `X.Y.Z`, the package version: what reports carry as `kvcr_version`
/// (docs/format.md §9.4).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit this binary was built from (12 hex digits), or `unknown`
/// when it was not built from a git checkout.
pub const GIT_COMMIT: &str = env!("KVCR_GIT_COMMIT");

/// The build date, YYYY-MM-DD UTC (`SOURCE_DATE_EPOCH` when set).
pub const BUILD_DATE: &str = env!("KVCR_BUILD_DATE");

/// The CUDA header version the driver declarations of `src/cuda_ffi.rs`
/// follow (the same `cuda-NNNNN` version the cudarc dev-dependency is built
/// with, for the GPU proof's owner), such as `CUDA 12.8 headers`; the driver
/// itself is loaded at run time and may be newer.
pub const CUDA_HEADERS: &str = env!("KVCR_CUDA_HEADERS");

/// What `kvcr --version` prints after `kvcr `.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("KVCR_GIT_COMMIT"),
    "\nbuilt: ",
    env!("KVCR_BUILD_DATE"),
    "\ncuda: ",
    env!("KVCR_CUDA_HEADERS"),
    " (driver API as declared in src/cuda_ffi.rs; libcuda loaded at run time, unknown codes reported by number)"
);

//! `kvcr import` entry point (landing in the next commits).
use crate::app::Failure;
use crate::cli::ImportArgs;

pub fn run(_a: &ImportArgs) -> Result<i32, Failure> {
    Err(Failure::usage("kvcr import is not available in this build", None))
}

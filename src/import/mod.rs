//! SPEC §8: the all-or-nothing import (landing in the next commits).
pub mod cli;

//! The command line as an operator meets it: output, terminal, exit statuses, explain, examine, man pages, the docs' examples.

mod examine;
mod examples_run;
pub(crate) mod explain;
mod man;
mod operator;
mod output;
mod output_paths;
mod terminal;
mod version;

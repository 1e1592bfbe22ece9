//! Groups that span nodes: `--local-ranks`, `kvcr merge` and the import gate's fleet proof (docs/format.md §10).

mod attacks;
mod gate;
mod judge;
mod nodes;
mod rules;

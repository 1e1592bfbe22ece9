//! What the audit writes: the JSON report and its schemas, Prometheus, the textfile (docs/format.md §9, docs/json.md).

mod json_oracle;
mod json_report;
mod json_schema;
mod monitoring;
mod prometheus;

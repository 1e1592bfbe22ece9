//! `kvcr explain [CODE]`: what a finding means, what kvcr checked, the safe
//! next step (docs/format.md §5.3); no CODE lists them all.

use crate::format::failure::Failure;
use crate::format::finding::Code;
use crate::io::output::emit;
use crate::rules::explain;
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ExplainArgs {
    /// A finding code (KV104), its number (104) or its name (geometry).
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

/// `kvcr explain`.
pub fn run(a: &ExplainArgs) -> Result<i32, Failure> {
    let pools = crate::pools::codes::Code::parse;
    let text = match a.code.as_deref().map(|c| (c, Code::parse(c))) {
        None => explain::render_list() + &crate::pools::codes::list(),
        Some((_, Some(code))) => explain::render(code),
        Some((c, None)) if pools(c).is_some() => {
            crate::pools::codes::explain(pools(c).expect("checked"))
        }
        Some((c, None)) => {
            return Err(Failure::usage(
                format!(
                    "unknown finding code {:?}",
                    crate::format::text::terminal(c)
                ),
                Some("run `kvcr explain` to list every code".to_string()),
            ))
        }
    };
    emit(|out| out.write_all(text.as_bytes()))?;
    Ok(crate::format::exit::OK)
}

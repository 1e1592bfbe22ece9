//! The one place a library error becomes a Python exception and is worded
//! for Python. The exceptions are the package's own classes
//! (`kvcr_audit.Error`, `UsageError`, `DescriptorError`, `Refused`, defined
//! in kvcr_audit/__init__.py), raised here with their attributes set by
//! their own constructors, so nothing crosses as a tuple to be unpacked on
//! the other side.
//!
//! They are Python classes, not `#[pyclass(extends = PyException)]` types,
//! because the wheel is built for the stable ABI from Python 3.9
//! (`abi3-py39`), where PyO3 cannot subclass a native type (that needs
//! 3.12); and not `create_exception!` types, whose constructor is
//! `BaseException`'s and could not keep the published ones
//! (`DescriptorError(code, field, message)`, `Refused(message, report)`:
//! kvcr_audit/__init__.pyi).

use kvcr_audit::api::Error;
use pyo3::prelude::*;

/// The command line's flags as the package's arguments, in the words of an
/// error: `--profile` is `profile=` here (docs/format.md §13.2).
fn python_words(text: &str) -> String {
    const WORDS: [(&str, &str); 11] = [
        (
            "(--profile FILE or $KVCR_PROFILE)",
            "(profile=, a path or a dict)",
        ),
        ("--profile", "profile="),
        ("--engine", "engine="),
        ("--local-ranks", "local_ranks="),
        ("--min-epoch", "min_epoch="),
        ("--max-age", "max_age="),
        ("--incarnation", "incarnation="),
        ("--fleet-report", "fleet_report="),
        ("--max-report-age", "max_report_age="),
        ("--strict", "strict=True"),
        ("--live", "live=True"),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for (flag, arg) in WORDS {
            // A whole flag only: not `--max-age` inside `--max-age-x`.
            let whole = rest.starts_with(flag)
                && !rest[flag.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if whole {
                out.push_str(arg);
                rest = &rest[flag.len()..];
                // A flag's value follows it: `--engine ID` is `engine=ID`.
                if arg.ends_with('=') {
                    rest = rest.strip_prefix(' ').unwrap_or(rest);
                }
                continue 'scan;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The error as Python sees it: the one place a library error becomes a
/// package exception and its message is worded for Python (a usage error's
/// hint joins its message; the flags a usage or refusal message names
/// become the package's arguments). The notes a refusal carries go to the
/// `kvcr_audit` logger first, as the command line prints them before it
/// exits.
pub fn raise(e: Error) -> PyErr {
    Python::attach(|py| match exception(py, e) {
        Ok(err) => err,
        Err(err) => err,
    })
}

fn exception(py: Python<'_>, e: Error) -> PyResult<PyErr> {
    let status = e.exit_status();
    let package = py.import("kvcr_audit")?;
    let value = match e {
        Error::Usage { message, hint } => {
            let message = match hint {
                Some(h) => format!("{message} (hint: {h})"),
                None => message,
            };
            package
                .getattr("UsageError")?
                .call1((python_words(&message),))?
        }
        Error::Descriptor {
            code,
            field,
            message,
        } => package
            .getattr("DescriptorError")?
            .call1((code.as_str(), field, message))?,
        Error::Refused { message, report } => {
            let log = py
                .import("logging")?
                .call_method1("getLogger", ("kvcr_audit",))?;
            for n in report.notes() {
                log.call_method1("info", ("%s", n))?;
            }
            let report = py
                .import("json")?
                .call_method1("loads", (report.into_json(),))?;
            package
                .getattr("Refused")?
                .call1((python_words(&message), report))?
        }
        Error::Other { message, .. } => package.getattr("Error")?.call1((message, status))?,
    };
    Ok(PyErr::from_value(value))
}

/// A usage error with `message` as it stands.
pub fn usage(message: String) -> PyErr {
    raise(Error::Usage {
        message,
        hint: None,
    })
}

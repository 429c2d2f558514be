//! `fleetform validate`: load a fleet repo and report every problem in it.

use serde::Serialize;

use super::{Empty, Output, SourceArgs, exit, print_data};
use crate::fleet::{Diagnostic, Fleet};
use crate::source::{self, LoadError, Origin};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    /// How to print the problems: one `file:line:column: /pointer: message` line each, or JSON
    /// or YAML.
    #[arg(short, long, value_enum, default_value_t)]
    output: Output,
    /// Accept a source without any fleet document (otherwise an error).
    #[arg(long)]
    allow_empty: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    source: &'a Origin,
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<Summary>,
    errors: &'a [Diagnostic],
}

#[derive(Serialize)]
struct Summary {
    hubs: usize,
    spokes: usize,
    addons: usize,
}

pub fn run(args: Args) -> u8 {
    let (origin, fleet, errors) = match source::load_fleet(&args.source.spec()) {
        Ok((origin, fleet)) => match Empty::from_flag(args.allow_empty).check(&origin, &fleet) {
            None => (origin, Some(fleet), Vec::new()),
            Some(message) => return refuse(args.output, &message, exit::INVALID_INPUT),
        },
        Err(LoadError::Invalid {
            origin,
            diagnostics,
        }) => (*origin, None, diagnostics),
        Err(LoadError::Source(err)) => {
            return refuse(
                args.output,
                &err.to_string(),
                super::source_error_code(&err),
            );
        }
    };
    let report = Report {
        source: &origin,
        valid: fleet.is_some(),
        summary: fleet.as_ref().map(|fleet: &Fleet| Summary {
            hubs: fleet.hubs.len(),
            spokes: fleet.spokes.len(),
            addons: fleet.addons.len(),
        }),
        errors: &errors,
    };
    match args.output {
        Output::Text => {
            outln!("source: {origin}");
            match &fleet {
                Some(fleet) => outln!("valid: {}", fleet.summary()),
                None => super::output::print_diagnostics(&errors),
            }
        }
        Output::Json | Output::Yaml => print_data(args.output, &report),
    }
    if report.valid {
        exit::OK
    } else {
        exit::INVALID_INPUT
    }
}

/// Reports a fleet that could not be validated at all, in the output's format.
fn refuse(output: Output, message: &str, code: u8) -> u8 {
    match output {
        Output::Text => errln!("error: {message}"),
        Output::Json | Output::Yaml => print_data(
            output,
            &serde_json::json!({ "valid": false, "error": message }),
        ),
    }
    code
}

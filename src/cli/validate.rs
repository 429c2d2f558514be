//! `fleetform validate`: load a fleet repo and report every problem in it.

use serde::Serialize;

use super::{Output, SourceArgs, exit, print_data};
use crate::fleet::{Diagnostic, Fleet};
use crate::source::{self, LoadError, Origin};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: SourceArgs,
    #[arg(short, long, value_enum, default_value_t)]
    output: Output,
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
        Ok((origin, fleet)) => (origin, Some(fleet), Vec::new()),
        Err(LoadError::Invalid {
            origin,
            diagnostics,
        }) => (origin, None, diagnostics),
        Err(LoadError::Source(err)) => {
            match args.output {
                Output::Text => eprintln!("error: {err}"),
                Output::Json | Output::Yaml => {
                    print_data(
                        args.output,
                        &serde_json::json!({ "valid": false, "error": err.to_string() }),
                    );
                }
            }
            return if err.is_internal() {
                exit::INTERNAL
            } else {
                exit::INVALID_INPUT
            };
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
            println!("source: {origin}");
            match &fleet {
                Some(fleet) => println!("valid: {}", fleet.summary()),
                None => super::print_diagnostics(&errors),
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

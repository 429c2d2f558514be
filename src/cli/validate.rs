//! `fleetform validate`: load a fleet repo and report every problem in it.

use serde::Serialize;

use super::{Output, exit, print_data};
use crate::fleet::{self, Diagnostic, Fleet};
use crate::source::{self, Origin, SourceSpec};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A directory, a local git repository, or a git URL (file://, https://, ssh://).
    #[arg(default_value = ".")]
    source: String,
    /// Branch, tag or commit to read (git sources only); default: HEAD or the remote's default
    /// branch.
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// Directory of the fleet inside the source.
    #[arg(long)]
    path: Option<String>,
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
    let spec = SourceSpec {
        location: args.source,
        git_ref: args.git_ref,
        path: args.path,
    };
    let snapshot = match source::read(&spec) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            match args.output {
                Output::Text => eprintln!("error: {err}"),
                Output::Json | Output::Yaml => {
                    let body = serde_json::json!({ "valid": false, "error": err.to_string() });
                    print_data(args.output, &body);
                }
            }
            return if err.is_internal() {
                exit::INTERNAL
            } else {
                exit::INVALID_INPUT
            };
        }
    };
    let mut errors = snapshot.problems;
    let fleet = match fleet::load(&snapshot.files) {
        Ok(fleet) => Some(fleet),
        Err(diagnostics) => {
            errors.extend(diagnostics);
            None
        }
    };
    errors.sort();
    let fleet = fleet.filter(|_| errors.is_empty());
    let report = Report {
        source: &snapshot.origin,
        valid: fleet.is_some(),
        summary: fleet.as_ref().map(|fleet: &Fleet| Summary {
            hubs: fleet.hubs.len(),
            spokes: fleet.spokes.len(),
            addons: fleet.addons.len(),
        }),
        errors: &errors,
    };
    match args.output {
        Output::Text => print_text(&report, fleet.as_ref()),
        Output::Json | Output::Yaml => print_data(args.output, &report),
    }
    if report.valid {
        exit::OK
    } else {
        exit::INVALID_INPUT
    }
}

fn print_text(report: &Report<'_>, fleet: Option<&Fleet>) {
    println!("source: {}", report.source);
    if let Some(fleet) = fleet {
        println!("valid: {}", fleet.summary());
        return;
    }
    for error in report.errors {
        println!("{error}");
    }
    let files: std::collections::BTreeSet<&str> =
        report.errors.iter().map(|e| e.file.as_str()).collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    println!(
        "invalid: {} in {}",
        plural(report.errors.len(), "error"),
        plural(files.len(), "file")
    );
}

//! What commands print and how: the data formats, and the writing itself. Output that nobody
//! reads any more (`fleetform status -o json | head`) ends quietly: Rust ignores SIGPIPE, so a
//! closed pipe is a write error, which `println!` would turn into a panic. Here the first such
//! error closes stdout for the rest of the run and the command ends with its own exit code;
//! any other write error is reported once and makes the exit code [`super::exit::INTERNAL`].

use std::fmt;
use std::io::{ErrorKind, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// How a command renders data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
    Yaml,
}

/// Stdout's reader went away: nothing more is written.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Output could not be rendered or written (a full disk, say): the run has failed.
static OUTPUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout, unless it is closed. Use [`out!`] and [`outln!`].
pub fn write_stdout(args: fmt::Arguments<'_>) {
    if stdout_closed() {
        return;
    }
    if let Err(err) = std::io::stdout().lock().write_fmt(args) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if err.kind() != ErrorKind::BrokenPipe {
            OUTPUT_FAILED.store(true, Ordering::Relaxed);
            write_stderr(format_args!("error: cannot write the output: {err}\n"));
        }
    }
}

/// Sends what was written to stdout on (a prompt without a line end, say).
pub fn flush_stdout() {
    if !stdout_closed() {
        let _ = std::io::stdout().lock().flush();
    }
}

/// Writes to stderr; a stderr that cannot be written is ignored (there is nowhere left to say
/// so). Use [`errln!`].
pub fn write_stderr(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Whether stdout was closed by its reader (or failed), so output loops can stop.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// The exit code of a run whose command returned `code`: output that could not be rendered or
/// written (other than to a closed pipe) fails it.
pub fn exit_code(code: u8) -> u8 {
    if OUTPUT_FAILED.load(Ordering::Relaxed) {
        super::exit::INTERNAL
    } else {
        code
    }
}

/// Colour (and other ANSI escapes) on `stream` only when it is a terminal and `NO_COLOR` is
/// unset or empty (<https://no-color.org>).
pub fn colour_on(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Prints validation problems, one per line, and a count.
pub fn print_diagnostics(errors: &[crate::fleet::Diagnostic]) {
    for error in errors {
        outln!("{error}");
    }
    let files: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.file.as_str()).collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    outln!(
        "invalid: {} in {}",
        plural(errors.len(), "error"),
        plural(files.len(), "file")
    );
}

/// Prints a value as JSON or YAML (`text` prints JSON: a command with a table of its own does
/// not call this for text).
pub fn print_data(output: Output, value: &impl serde::Serialize) {
    let rendered = match output {
        Output::Yaml => serde_yaml::to_string(value).map_err(|e| e.to_string()),
        Output::Text | Output::Json => {
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())
        }
    };
    match rendered {
        Ok(text) => outln!("{}", text.trim_end()),
        Err(err) => {
            OUTPUT_FAILED.store(true, Ordering::Relaxed);
            errln!("error: cannot render the output: {err}");
        }
    }
}

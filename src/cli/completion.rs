//! `fleetform completion SHELL`: the shell completion script for every command and flag.

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, exit};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete in.
    shell: Shell,
}

pub fn run(args: Args) -> u8 {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "fleetform", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    exit::OK
}

//! `fleetform crds`: the CustomResourceDefinitions fleetform reads and writes.

use std::path::PathBuf;

use super::exit;
use crate::api;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write one file per CRD into this directory instead of printing a YAML stream.
    #[arg(long)]
    out_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> u8 {
    let Some(dir) = args.out_dir else {
        out!("{}", api::crds_yaml());
        return exit::OK;
    };
    match api::write_crds(&dir) {
        Ok(written) => {
            for path in written {
                outln!("wrote {}", path.display());
            }
            exit::OK
        }
        Err(err) => {
            errln!("error: cannot write CRDs to {}: {err}", dir.display());
            exit::INTERNAL
        }
    }
}

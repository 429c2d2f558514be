//! `fleetform verify`: whether a commit is signed by a trusted key, for CI; and `--verify`, the
//! same requirement on the commit `validate`, `plan`, `apply` and `status` read.

use std::path::PathBuf;

use super::exit;
use crate::api::fleet::VerifyMode;
use crate::source::{Keys, SourceSpec, Verification};

/// Which signature `--verify` checks, on the command line: spelled as a FleetSync's
/// `spec.verify.mode` spells it (`HEAD`, `Tag`), in any case, so one word works in both places.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// The commit's own signature.
    #[default]
    #[value(name = "HEAD")]
    Head,
    /// The signature of the annotated tag `--ref` names.
    #[value(name = "Tag")]
    Tag,
}

impl From<ModeArg> for VerifyMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Head => VerifyMode::Head,
            ModeArg::Tag => VerifyMode::Tag,
        }
    }
}

/// `--verify KEYS` and `--verify-mode`, shared by the commands that read a fleet source.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Read only a commit signed by a key of this file (SSH `allowed_signers` lines and/or
    /// ASCII-armored OpenPGP public keys); the plan shows who signed.
    #[arg(long, value_name = "KEYS")]
    verify: Option<PathBuf>,
    /// Which signature --verify checks: the commit's (HEAD) or the annotated tag's that --ref
    /// names (Tag); as a FleetSync's spec.verify.mode, in any case.
    #[arg(
        long,
        value_enum,
        default_value_t,
        ignore_case = true,
        requires = "verify"
    )]
    verify_mode: ModeArg,
}

impl VerifyArgs {
    /// The verification asked for, if any; the keys file is read with the source.
    pub fn verification(&self) -> Option<Verification> {
        self.verify.as_ref().map(|path| Verification {
            mode: self.verify_mode.into(),
            keys: Keys::File(path.clone()),
        })
    }
}

/// A saved plan carries no commit to check: `--verify` with one is refused, not ignored.
pub fn refuse_with_saved_plan(source: &super::SourceArgs) -> Result<(), u8> {
    if source.verify.verify.is_none() {
        return Ok(());
    }
    errln!(
        "error: --verify checks the commit a plan is made from: give it to `fleetform plan --verify` (the saved plan names who signed in its source), not to apply of a saved plan"
    );
    Err(exit::INVALID_INPUT)
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A local git repository or a git URL (file://, https://, ssh://).
    #[arg(env = super::SOURCE_ENV, default_value = super::DEFAULT_SOURCE)]
    source: String,
    /// Branch, tag or commit to check; default: HEAD or the remote's default branch.
    #[arg(long = "ref")]
    git_ref: Option<String>,
    /// The trusted keys: SSH `allowed_signers` lines and/or ASCII-armored OpenPGP public keys.
    #[arg(long, value_name = "FILE")]
    keys: PathBuf,
    /// Which signature to check: the commit's (HEAD) or the annotated tag's that --ref names
    /// (Tag); as a FleetSync's spec.verify.mode, in any case.
    #[arg(long, value_enum, default_value_t, ignore_case = true)]
    mode: ModeArg,
}

/// Exit 0 when the commit is signed by a trusted key (saying by whom), 1 when it is not or
/// cannot be checked (saying why), 3 when fleetform itself failed.
pub fn run(args: Args) -> u8 {
    let spec = SourceSpec {
        location: args.source,
        git_ref: args.git_ref,
        path: None,
        commits_only: true,
        verify: Some(Verification {
            mode: args.mode.into(),
            keys: Keys::File(args.keys),
        }),
    };
    match crate::source::read(&spec) {
        Ok(snapshot) => {
            let origin = &snapshot.origin;
            match (origin.commit(), origin.signed_by()) {
                (Some(commit), Some(signer)) => {
                    outln!("commit {commit} is signed by {signer}");
                    exit::OK
                }
                _ => {
                    errln!("error: {origin} was read without a signature check");
                    exit::INTERNAL
                }
            }
        }
        Err(err) => {
            errln!("error: {err}");
            super::source_error_code(&err)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// `--verify-mode` of `plan` and the others beside `fleetform verify`'s own arguments.
    #[derive(Debug, clap::Parser)]
    struct Command {
        #[command(flatten)]
        verify: VerifyArgs,
        #[command(flatten)]
        command: Args,
    }

    #[test]
    fn the_mode_takes_the_fleetsync_spelling_in_any_case() {
        for (word, mode) in [
            ("HEAD", ModeArg::Head),
            ("head", ModeArg::Head),
            ("Head", ModeArg::Head),
            ("Tag", ModeArg::Tag),
            ("tag", ModeArg::Tag),
            ("TAG", ModeArg::Tag),
        ] {
            let parsed = Command::try_parse_from([
                "x",
                "--keys",
                "k",
                "--verify",
                "k",
                "--verify-mode",
                word,
                "--mode",
                word,
            ])
            .unwrap_or_else(|err| panic!("{word}: {err}"));
            assert_eq!(parsed.verify.verify_mode, mode, "--verify-mode {word}");
            assert_eq!(parsed.command.mode, mode, "--mode {word}");
        }
    }

    #[test]
    fn help_and_errors_name_the_modes_as_a_fleetsync_does() {
        let err = Command::try_parse_from(["x", "--keys", "k", "--mode", "commit"]).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("[possible values: HEAD, Tag]"),
            "{message}"
        );
    }
}

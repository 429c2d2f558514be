//! Owner-only state on disk: the data directory, the database and the PKI are created
//! readable and writable by their owner only, whatever the process umask, and a start finds
//! them so or refuses, naming the file and the `chmod` that fixes it.
//!
//! Owns modes only; what lives in the files is [`crate::storage`]'s and [`crate::auth::ca`]'s.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of private directories.
pub const DIR_MODE: u32 = 0o700;
/// The mode of private files.
pub const FILE_MODE: u32 = 0o600;

/// A private file or directory that group or others may use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to start: {what} {path} is readable by group or others (mode {mode:o}); run `chmod {fix:o} {path}`"
)]
pub struct Exposed {
    /// What the path holds, e.g. `data directory`, `database`, `private key`.
    pub what: &'static str,
    pub path: PathBuf,
    pub mode: u32,
    /// The mode to set.
    pub fix: u32,
}

/// Why a private path could not be checked or made private.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    #[error(transparent)]
    Exposed(#[from] Exposed),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PrivateError {
    let path = path.to_path_buf();
    move |source| PrivateError::Io {
        action,
        path,
        source,
    }
}

/// Refuses `path` (a file, or a directory when `fix` is [`DIR_MODE`]) when group or others
/// have any permission on it.
pub fn check(what: &'static str, path: &Path, fix: u32) -> Result<(), PrivateError> {
    let mode = fs::metadata(path)
        .map_err(io("read", path))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(Exposed {
            what,
            path: path.to_path_buf(),
            mode,
            fix,
        }
        .into());
    }
    Ok(())
}

/// Creates `dir` (and missing parents) with mode 0700, or checks an existing one.
pub fn create_or_check_dir(what: &'static str, dir: &Path) -> Result<(), PrivateError> {
    if dir.is_dir() {
        return check(what, dir, DIR_MODE);
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io("create", dir))?;
    // The mode given at creation is narrowed by the umask, never widened, so this only
    // matters for a directory created by someone else in between; it costs one syscall.
    set_mode(dir, DIR_MODE)
}

/// Sets `path`'s mode exactly (for files another library created, such as SQLite's).
pub fn set_mode(path: &Path, mode: u32) -> Result<(), PrivateError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io("chmod", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_paths_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        set_mode(&file, 0o644).unwrap();
        let err = check("database", &file, FILE_MODE).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "refusing to start: database {p} is readable by group or others (mode 644); run `chmod 600 {p}`",
                p = file.display()
            )
        );
        set_mode(&file, 0o600).unwrap();
        check("database", &file, FILE_MODE).unwrap();
    }

    #[test]
    fn new_directories_are_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_or_check_dir("data directory", &nested).unwrap();
        let mode = fs::metadata(&nested).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, DIR_MODE);
        set_mode(&nested, 0o750).unwrap();
        let err = create_or_check_dir("data directory", &nested).unwrap_err();
        assert!(err.to_string().contains("run `chmod 700"), "{err}");
    }
}

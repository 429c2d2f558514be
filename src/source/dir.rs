//! Reading a fleet from a directory on disk.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{Origin, Snapshot, SourceError, join};
use crate::fleet::yaml::Position;
use crate::fleet::{Diagnostic, FleetFile, MAX_FILE_SIZE, is_fleet_file};

/// Reads every fleet file under `root`. Hidden entries (`.git`, `.github`, …) are skipped;
/// symlinks are followed only while they stay inside `root`.
pub(super) fn read(root: &Path, uncommitted_changes: bool) -> Result<Snapshot, SourceError> {
    let canonical_root =
        fs::canonicalize(root).map_err(|_| SourceError::NotFound(root.display().to_string()))?;
    if !canonical_root.is_dir() {
        return Err(SourceError::BadPath {
            location: root.display().to_string(),
            path: String::new(),
            problem: "is not a directory".to_string(),
        });
    }
    let mut walk = Walk {
        root: canonical_root.clone(),
        files: Vec::new(),
        problems: Vec::new(),
        visited: HashSet::from([canonical_root.clone()]),
    };
    walk.directory(&canonical_root, "");
    walk.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Snapshot {
        origin: Origin::Directory {
            path: root.to_path_buf(),
            uncommitted_changes,
        },
        files: walk.files,
        problems: walk.problems,
    })
}

struct Walk {
    root: PathBuf,
    files: Vec<FleetFile>,
    problems: Vec<Diagnostic>,
    /// Canonical directories already walked, so symlinked directories cannot loop.
    visited: HashSet<PathBuf>,
}

impl Walk {
    fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems
            .push(Diagnostic::file(path, Position::START, message));
    }

    fn directory(&mut self, dir: &Path, relative: &str) {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                let shown = if relative.is_empty() { "." } else { relative };
                self.problem(shown, format!("cannot read directory: {err}"));
                return;
            }
        };
        let mut names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .collect();
        names.sort();
        for name in names {
            let Some(name) = name.to_str() else {
                let lossy = name.to_string_lossy().into_owned();
                self.problem(&join(relative, &lossy), "file name is not valid UTF-8");
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            self.entry(&dir.join(name), &join(relative, name));
        }
    }

    fn entry(&mut self, path: &Path, relative: &str) {
        let Ok(link_metadata) = fs::symlink_metadata(path) else {
            self.problem(relative, "cannot read file metadata");
            return;
        };
        let target = if link_metadata.file_type().is_symlink() {
            match fs::canonicalize(path) {
                Ok(target) if target.starts_with(&self.root) => target,
                Ok(target) => {
                    if target.is_dir() || is_fleet_file(relative) {
                        let written = fs::read_link(path).unwrap_or(target);
                        self.problem(
                            relative,
                            format!(
                                "symlink leads outside the fleet root (to {})",
                                written.display()
                            ),
                        );
                    }
                    return;
                }
                Err(_) => {
                    if is_fleet_file(relative) {
                        self.problem(relative, "broken symlink");
                    }
                    return;
                }
            }
        } else {
            path.to_path_buf()
        };
        if target.is_dir() {
            if let Ok(canonical) = fs::canonicalize(&target)
                && self.visited.insert(canonical.clone())
            {
                self.directory(&canonical, relative);
            }
        } else if is_fleet_file(relative) {
            self.file(&target, relative);
        }
    }

    fn file(&mut self, path: &Path, relative: &str) {
        match fs::metadata(path) {
            Ok(metadata) if metadata.len() > MAX_FILE_SIZE => {
                self.problem(
                    relative,
                    format!(
                        "file is {} bytes, larger than the 1 MiB limit",
                        metadata.len()
                    ),
                );
            }
            Ok(_) => match fs::read(path) {
                Ok(content) => self.files.push(FleetFile {
                    path: relative.to_string(),
                    content,
                }),
                Err(err) => self.problem(relative, format!("cannot read file: {err}")),
            },
            Err(err) => self.problem(relative, format!("cannot read file: {err}")),
        }
    }
}

//! Where a fleet repo is read from: a directory, or a git repository at a commit.
//!
//! A source yields the fleet's YAML files (paths relative to the fleet root) and what it read them
//! from, pinned to a commit SHA whenever git is involved. Reading from git goes through the
//! commit's tree objects (git2), never a checkout. Problems with single files (too large, a symlink
//! leading out of the fleet root) are reported per file, so one run still shows everything.
//! A source may require the commit to be signed by trusted keys ([`Verification`]): it is then
//! checked before its tree is read, and an unsigned or wrongly signed commit is never read.

mod dir;
mod git;
mod keys;
mod signature;

pub use keys::{KeysError, Signer, TrustedKeys};
pub use signature::{Keys, SignatureError, Signed, Verification};

use std::fmt;
use std::path::{Path, PathBuf};

use crate::fleet::{Diagnostic, FleetFile};

/// What the user asked to read.
#[derive(Clone, Debug, Default)]
pub struct SourceSpec {
    /// A directory, a local git repository, or a URL (`file://`, `https://`, `ssh://`,
    /// `user@host:path`).
    pub location: String,
    /// Branch, tag or commit; the default branch (or a local repository's HEAD) when absent.
    pub git_ref: Option<String>,
    /// Directory of the fleet inside the source.
    pub path: Option<String>,
    /// Read only what is committed: a local work tree is read at its ref (default HEAD) even
    /// with uncommitted changes, and a plain directory is refused. Whatever follows a repository
    /// (sync, and so `up`) applies commits, never edits.
    pub commits_only: bool,
    /// The signature the commit must carry; set, it implies `commits_only`.
    pub verify: Option<Verification>,
}

/// The files of a fleet as read from one place at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub origin: Origin,
    pub files: Vec<FleetFile>,
    /// Files that could not be read; validation reports them with its own findings.
    pub problems: Vec<Diagnostic>,
}

/// What a snapshot was read from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "type"
)]
pub enum Origin {
    /// Files of a directory, as they are on disk.
    Directory {
        path: PathBuf,
        /// The directory is in a git work tree with uncommitted changes, so no commit pins it.
        uncommitted_changes: bool,
    },
    /// The tree of one commit.
    Git {
        /// The repository (local path or URL) as given.
        repository: String,
        /// The ref that was resolved, as given or the default.
        #[serde(rename = "ref")]
        git_ref: String,
        commit: String,
        /// Directory of the fleet inside the repository ("" for its root).
        path: String,
        /// The commit's subject (its message's first paragraph on one line, as `git log --format=%s`
        /// shows it), for people: events, `up`'s console.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        subject: String,
        /// Who signed the commit (or its tag), when the source required a signature.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signed_by: Option<Signer>,
    },
}

impl Origin {
    /// The commit the snapshot is pinned to, if any.
    pub fn commit(&self) -> Option<&str> {
        match self {
            Origin::Git { commit, .. } => Some(commit),
            Origin::Directory { .. } => None,
        }
    }

    /// The commit's subject, if the snapshot is pinned to a commit.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Origin::Git { subject, .. } => Some(subject),
            Origin::Directory { .. } => None,
        }
    }

    /// Who signed the commit, when the source required a signature.
    pub fn signed_by(&self) -> Option<&Signer> {
        match self {
            Origin::Git { signed_by, .. } => signed_by.as_ref(),
            Origin::Directory { .. } => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Directory {
                path,
                uncommitted_changes: true,
            } => write!(
                f,
                "{} (working directory with uncommitted changes: read as files, not pinned to a commit)",
                path.display()
            ),
            Origin::Directory { path, .. } => write!(f, "{} (directory)", path.display()),
            Origin::Git {
                repository,
                git_ref,
                commit,
                path,
                signed_by,
                ..
            } => {
                write!(f, "{repository} at {git_ref}, commit {commit}")?;
                if !path.is_empty() {
                    write!(f, ", path {path}")?;
                }
                if let Some(signer) = signed_by {
                    write!(f, ", signed by {signer}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why a source could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}: no such file, directory or repository")]
    NotFound(String),
    #[error("{location}: --ref {git_ref} needs a git repository, but this is a plain directory")]
    RefWithoutGit { location: String, git_ref: String },
    #[error("{repository}: unknown ref {git_ref:?}{hint}{known}")]
    UnknownRef {
        repository: String,
        git_ref: String,
        /// `; did you mean "main"?` for the nearest known ref, or nothing.
        hint: String,
        /// ` (known refs: …)`, or nothing.
        known: String,
    },
    #[error(
        "{location}: not in a git repository; only commits are followed (run `git init && git add -A && git commit` there, or point at a repository)"
    )]
    NotARepository { location: String },
    #[error("{repository}: the repository has no commits")]
    NoCommits { repository: String },
    #[error("{location}: fleet path {path:?} {problem}")]
    BadPath {
        location: String,
        path: String,
        problem: String,
    },
    #[error("cannot fetch {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("{location}: cannot read git repository: {message}")]
    Git { location: String, message: String },
    #[error("{location}: {error}")]
    Signature {
        location: String,
        /// Boxed: it names the commit and the key, and most errors are far smaller.
        error: Box<SignatureError>,
    },
    #[error(
        "{location}: signatures can only be verified on commits, but this is a plain directory"
    )]
    VerifyWithoutGit { location: String },
    #[error(transparent)]
    Keys(#[from] KeysError),
    #[error("cannot use cache directory {}: {source}", path.display())]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SourceError {
    /// Whether the error is fleetform's own (its cache), rather than something about the input.
    pub fn is_internal(&self) -> bool {
        matches!(self, SourceError::Cache { .. })
    }
}

/// Why a fleet could not be loaded: its source could not be read, or what it holds is invalid.
#[derive(Debug)]
pub enum LoadError {
    Source(SourceError),
    Invalid {
        /// Boxed: the error would otherwise be larger than what it is the error of.
        origin: Box<Origin>,
        diagnostics: Vec<Diagnostic>,
    },
}

/// Reads a fleet repo and loads the fleet it declares, or every problem found in it.
pub fn load_fleet(spec: &SourceSpec) -> Result<(Origin, crate::fleet::Fleet), LoadError> {
    let (origin, fleet, diagnostics) = load_fleet_partial(spec).map_err(LoadError::Source)?;
    if diagnostics.is_empty() {
        Ok((origin, fleet))
    } else {
        Err(LoadError::Invalid {
            origin: Box::new(origin),
            diagnostics,
        })
    }
}

/// Reads a fleet repo and loads what is valid of it (see [`crate::fleet::load_partial`]), with
/// every problem found in it (none: the fleet is valid).
pub fn load_fleet_partial(
    spec: &SourceSpec,
) -> Result<(Origin, crate::fleet::Fleet, Vec<Diagnostic>), SourceError> {
    let snapshot = read(spec)?;
    tracing::debug!(origin = %snapshot.origin, files = snapshot.files.len(), "read the fleet source");
    let mut diagnostics = snapshot.problems;
    let (fleet, found) = crate::fleet::load_partial(&snapshot.files);
    diagnostics.extend(found);
    diagnostics.sort();
    Ok((snapshot.origin, fleet, diagnostics))
}

/// Reads a fleet repo from wherever `spec` says.
pub fn read(spec: &SourceSpec) -> Result<Snapshot, SourceError> {
    let fleet_path = normalize_fleet_path(spec)?;
    if git::is_url(&spec.location) {
        return git::read_remote(spec, &fleet_path);
    }
    let location = Path::new(&spec.location);
    if !location.exists() {
        return Err(SourceError::NotFound(spec.location.clone()));
    }
    match git::open_local(location) {
        Some(local) => local.read(spec, &fleet_path),
        None => {
            if spec.verify.is_some() {
                return Err(SourceError::VerifyWithoutGit {
                    location: spec.location.clone(),
                });
            }
            if spec.commits_only {
                return Err(SourceError::NotARepository {
                    location: spec.location.clone(),
                });
            }
            if let Some(git_ref) = &spec.git_ref {
                return Err(SourceError::RefWithoutGit {
                    location: spec.location.clone(),
                    git_ref: git_ref.clone(),
                });
            }
            dir::read(&join_fleet_path(location, &fleet_path), false)
        }
    }
}

/// The commit the ref of a git source points at now (a remote one fetched first), without
/// reading its tree: a follower that holds that commit loaded need not load it again. `None`
/// for a plain directory, or a source not read as commits only, which no commit stands for.
pub fn current_commit(spec: &SourceSpec) -> Result<Option<String>, SourceError> {
    if !(spec.commits_only || spec.verify.is_some()) {
        // Read from its work tree when that has changes: no commit stands for it.
        return Ok(None);
    }
    if git::is_url(&spec.location) {
        return git::commit_at(spec, None).map(Some);
    }
    match git::open_local(Path::new(&spec.location)) {
        Some(local) => git::commit_at(spec, Some(local)).map(Some),
        None => Ok(None),
    }
}

/// Reads the files of a directory as they are on disk, whether or not it is in a git work tree.
pub fn read_directory(path: &Path) -> Result<Snapshot, SourceError> {
    dir::read(path, false)
}

/// The fleet path as clean `/`-separated components inside the source, or an error when it
/// would leave the source.
fn normalize_fleet_path(spec: &SourceSpec) -> Result<String, SourceError> {
    let Some(path) = spec.path.as_deref() else {
        return Ok(String::new());
    };
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(SourceError::BadPath {
                    location: spec.location.clone(),
                    path: path.to_string(),
                    problem: "leads outside the source".to_string(),
                });
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// The fleet directory inside a local location.
fn join_fleet_path(location: &Path, fleet_path: &str) -> PathBuf {
    if fleet_path.is_empty() {
        location.to_path_buf()
    } else {
        location.join(fleet_path)
    }
}

/// Joins a `/`-separated relative path onto a parent ("" is the root).
fn join(parent: &str, name: &str) -> String {
    match (parent.is_empty(), name.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => parent.to_string(),
        (false, false) => format!("{parent}/{name}"),
    }
}

/// Resolves a symlink target, relative to the directory holding the link (both inside the fleet
/// root, `/`-separated), to a path inside the fleet root; `None` when it leads outside.
fn resolve_link(link_dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link_dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets_resolve_inside_the_root_only() {
        assert_eq!(
            resolve_link("spokes", "../common/a.yaml").as_deref(),
            Some("common/a.yaml")
        );
        assert_eq!(resolve_link("", "./a.yaml").as_deref(), Some("a.yaml"));
        assert_eq!(resolve_link("spokes", "../../secret.yaml"), None);
        assert_eq!(resolve_link("", "/etc/passwd"), None);
    }

    #[test]
    fn joined_paths_have_no_stray_separators() {
        assert_eq!(join("", "a.yaml"), "a.yaml");
        assert_eq!(join("fleet", ""), "fleet");
        assert_eq!(join("fleet", "a.yaml"), "fleet/a.yaml");
    }

    #[test]
    fn following_commits_refuses_a_plain_directory_and_ignores_a_dirty_work_tree() {
        let plain = tempfile::tempdir().unwrap();
        let spec = SourceSpec {
            location: plain.path().display().to_string(),
            commits_only: true,
            ..SourceSpec::default()
        };
        assert!(matches!(
            read(&spec),
            Err(SourceError::NotARepository { .. })
        ));

        let repo = git2::Repository::init(plain.path()).unwrap();
        std::fs::write(plain.path().join("a.yaml"), "committed: true\n").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("a.yaml")).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let author = git2::Signature::now("t", "t@example.com").unwrap();
        let commit = repo
            .commit(Some("HEAD"), &author, &author, "one", &tree, &[])
            .unwrap();
        std::fs::write(plain.path().join("a.yaml"), "committed: false\n").unwrap();
        std::fs::write(plain.path().join("b.yaml"), "untracked: true\n").unwrap();

        let snapshot = read(&spec).unwrap();
        assert_eq!(snapshot.origin.commit(), Some(commit.to_string().as_str()));
        let files: Vec<&str> = snapshot.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(files, ["a.yaml"]);
        assert_eq!(snapshot.files[0].content, b"committed: true\n");
        // Without it, a directory shows its edits, saying so.
        let edits = read(&SourceSpec {
            commits_only: false,
            ..spec
        })
        .unwrap();
        assert!(matches!(
            edits.origin,
            Origin::Directory {
                uncommitted_changes: true,
                ..
            }
        ));
    }

    #[test]
    fn the_current_commit_is_the_one_a_read_would_load_local_or_fetched() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let author = git2::Signature::now("t", "t@example.com").unwrap();
        let commit = |content: &str, parents: &[&git2::Commit<'_>]| {
            std::fs::write(dir.path().join("a.yaml"), content).unwrap();
            let mut index = repo.index().unwrap();
            index.add_path(Path::new("a.yaml")).unwrap();
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            repo.commit(Some("HEAD"), &author, &author, content, &tree, parents)
                .unwrap()
        };
        let first = commit("one: 1\n", &[]);
        let local = SourceSpec {
            location: dir.path().display().to_string(),
            commits_only: true,
            ..SourceSpec::default()
        };
        // Fetched into the user's cache, under a name of its own (the URL's digest).
        let remote = SourceSpec {
            location: format!("file://{}", dir.path().display()),
            ..local.clone()
        };
        for spec in [&local, &remote] {
            assert_eq!(current_commit(spec).unwrap(), Some(first.to_string()));
        }
        let second = commit("one: 2\n", &[&repo.find_commit(first).unwrap()]);
        for spec in [&local, &remote] {
            let current = current_commit(spec).unwrap();
            assert_eq!(current, Some(second.to_string()));
            assert_eq!(read(spec).unwrap().origin.commit(), current.as_deref());
        }
        // A work tree read as it is, or a plain directory: no commit stands for it.
        let edits = SourceSpec {
            commits_only: false,
            ..local
        };
        assert_eq!(current_commit(&edits).unwrap(), None);
        let plain = tempfile::tempdir().unwrap();
        let plain = SourceSpec {
            location: plain.path().display().to_string(),
            commits_only: true,
            ..SourceSpec::default()
        };
        assert_eq!(current_commit(&plain).unwrap(), None);
    }

    #[test]
    fn fleet_paths_may_not_leave_the_source() {
        let spec = |path: &str| SourceSpec {
            location: "repo".into(),
            path: Some(path.into()),
            ..SourceSpec::default()
        };
        assert_eq!(
            normalize_fleet_path(&spec("./fleet//prod/")).unwrap(),
            "fleet/prod"
        );
        assert!(normalize_fleet_path(&spec("fleet/../../x")).is_err());
    }
}

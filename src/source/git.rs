//! Reading a fleet from the tree of a git commit, locally or fetched into the cache.
//!
//! Credentials for remote repositories: `ssh://` and `user@host:path` URLs use the running
//! ssh-agent; `https://` URLs use the token in `FLEETFORM_GIT_TOKEN` (user name from
//! `FLEETFORM_GIT_USERNAME`, default `x-access-token`). Fetched repositories are kept as bare
//! repositories under `$FLEETFORM_CACHE_DIR` (default: the user's cache dir + `fleetform`).

use std::path::{Path, PathBuf};
use std::sync::Once;

use git2::{
    AutotagOption, Cred, CredentialType, FetchOptions, ObjectType, Oid, RemoteCallbacks,
    Repository, Status, StatusOptions, Tree, TreeEntry,
};

use super::{Origin, Snapshot, SourceError, SourceSpec, join, resolve_link};
use crate::fleet::names::did_you_mean;
use crate::fleet::yaml::Position;
use crate::fleet::{Diagnostic, FleetFile, MAX_FILE_SIZE, is_fleet_file};

const LINK_MODE: i32 = 0o120000;
/// How many symlinks may follow one another before the chain counts as a loop.
const MAX_LINK_HOPS: usize = 8;
/// Deepest directory nesting read from a tree (symlinked directories can otherwise recurse).
const MAX_TREE_DEPTH: usize = 32;

/// Whether the location is a URL rather than a local path.
pub(super) fn is_url(location: &str) -> bool {
    if location.contains("://") {
        return true;
    }
    // scp-like `user@host:path`: a colon before any slash, and not an existing local path.
    match (location.find(':'), location.find('/')) {
        (Some(colon), slash) => {
            colon > 1 && slash.is_none_or(|slash| colon < slash) && !Path::new(location).exists()
        }
        _ => false,
    }
}

/// A git repository on this machine and where the given location sits in it.
pub(super) struct LocalRepo {
    repo: Repository,
    /// The given location relative to the repository's work tree ("" for its root).
    prefix: String,
    location: PathBuf,
}

/// Opens the repository a local path belongs to, if it belongs to one.
pub(super) fn open_local(location: &Path) -> Option<LocalRepo> {
    let repo = Repository::discover(location).ok()?;
    let canonical = std::fs::canonicalize(location).ok()?;
    let prefix = match repo.workdir() {
        Some(workdir) => {
            let workdir = std::fs::canonicalize(workdir).ok()?;
            let relative = canonical.strip_prefix(&workdir).ok()?;
            relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        }
        None => String::new(),
    };
    Some(LocalRepo {
        repo,
        prefix,
        location: location.to_path_buf(),
    })
}

impl LocalRepo {
    pub(super) fn read(self, spec: &SourceSpec, fleet_path: &str) -> Result<Snapshot, SourceError> {
        let in_repo = join(&self.prefix, fleet_path);
        let follows_commits = spec.commits_only || spec.verify.is_some();
        if spec.git_ref.is_none() && !follows_commits && self.repo.workdir().is_some() {
            let unborn = self.repo.head().is_err();
            if unborn || self.has_changes(&in_repo, &spec.location)? {
                return super::dir::read(&super::join_fleet_path(&self.location, fleet_path), true);
            }
        }
        let git_ref = spec.git_ref.clone().unwrap_or_else(|| "HEAD".to_string());
        let target = resolve(&self.repo, &git_ref, &[], &spec.location)?;
        read_commit(&self.repo, &target, spec, &git_ref, &in_repo)
    }

    fn has_changes(&self, in_repo: &str, location: &str) -> Result<bool, SourceError> {
        let mut options = StatusOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false);
        if !in_repo.is_empty() {
            options.pathspec(in_repo);
        }
        let statuses = self
            .repo
            .statuses(Some(&mut options))
            .map_err(|err| git_error(location, err))?;
        Ok(statuses
            .iter()
            .any(|entry| entry.status() != Status::CURRENT))
    }
}

/// Fetches a remote repository into the cache and reads the fleet at the requested ref.
pub(super) fn read_remote(spec: &SourceSpec, fleet_path: &str) -> Result<Snapshot, SourceError> {
    let (repo, git_ref) = fetch_remote(spec)?;
    let target = resolve(
        &repo,
        &git_ref,
        &remote_candidates(&git_ref),
        &spec.location,
    )?;
    read_commit(&repo, &target, spec, &git_ref, fleet_path)
}

/// Fetches a remote repository into the cache; returns the cached repository and the ref to
/// read (the one asked for, or the remote's default branch).
fn fetch_remote(spec: &SourceSpec) -> Result<(Repository, String), SourceError> {
    let url = spec.location.as_str();
    let cache = cache_path(url)?;
    let repo = match Repository::open_bare(&cache) {
        Ok(repo) => repo,
        Err(_) => {
            std::fs::create_dir_all(&cache).map_err(|source| SourceError::Cache {
                path: cache.clone(),
                source,
            })?;
            Repository::init_bare(&cache).map_err(|err| git_error(url, err))?
        }
    };
    let default_branch = fetch(&repo, url)?;
    let git_ref = match &spec.git_ref {
        Some(git_ref) => git_ref.clone(),
        None => default_branch
            .as_deref()
            .and_then(|branch| branch.strip_prefix("refs/heads/"))
            .ok_or_else(|| SourceError::NoCommits {
                repository: url.to_string(),
            })?
            .to_string(),
    };
    Ok((repo, git_ref))
}

/// Where a fetched ref is found in the cached repository.
fn remote_candidates(git_ref: &str) -> [String; 3] {
    [
        format!("refs/remotes/origin/{git_ref}"),
        format!("refs/tags/{git_ref}"),
        git_ref
            .strip_prefix("refs/heads/")
            .map(|branch| format!("refs/remotes/origin/{branch}"))
            .unwrap_or_default(),
    ]
}

/// The commit a repository's ref points at (fetched first, for a remote one), without reading
/// its tree.
pub(super) fn commit_at(
    spec: &SourceSpec,
    local: Option<LocalRepo>,
) -> Result<String, SourceError> {
    let commit = match local {
        Some(local) => {
            let git_ref = spec.git_ref.as_deref().unwrap_or("HEAD");
            resolve(&local.repo, git_ref, &[], &spec.location)?.commit
        }
        None => {
            let (repo, git_ref) = fetch_remote(spec)?;
            resolve(
                &repo,
                &git_ref,
                &remote_candidates(&git_ref),
                &spec.location,
            )?
            .commit
        }
    };
    Ok(commit.to_string())
}

fn cache_path(url: &str) -> Result<PathBuf, SourceError> {
    let base = match std::env::var_os("FLEETFORM_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => dirs::cache_dir()
            .ok_or_else(|| SourceError::Cache {
                path: PathBuf::from("~/.cache"),
                source: std::io::Error::other(
                    "no cache directory for this user (set FLEETFORM_CACHE_DIR)",
                ),
            })?
            .join("fleetform"),
    };
    // The URL's tail keeps the cache readable; the digest keeps it unique.
    let sanitized: Vec<char> = url
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let readable: String = sanitized[sanitized.len().saturating_sub(48)..]
        .iter()
        .collect();
    let digest = Oid::hash_object(ObjectType::Blob, url.as_bytes())
        .map(|oid| oid.to_string()[..12].to_string())
        .unwrap_or_default();
    Ok(base.join("git").join(format!("{readable}-{digest}")))
}

/// Fetches branches and tags; returns the remote's default branch (`refs/heads/...`).
fn fetch(repo: &Repository, url: &str) -> Result<Option<String>, SourceError> {
    static TIMEOUTS: Once = Once::new();
    TIMEOUTS.call_once(|| {
        // SAFETY: libgit2's global options are set once, before this process starts any fetch.
        unsafe {
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(10_000);
            let _ = git2::opts::set_server_timeout_in_milliseconds(60_000);
        }
    });
    let mut remote = repo
        .remote_anonymous(url)
        .map_err(|err| fetch_error(url, err))?;
    let mut options = FetchOptions::new();
    options.remote_callbacks(credentials());
    options.download_tags(AutotagOption::All);
    options.prune(git2::FetchPrune::On);
    remote
        .fetch(
            &[
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
            ],
            Some(&mut options),
            None,
        )
        .map_err(|err| fetch_error(url, err))?;
    Ok(remote
        .default_branch()
        .ok()
        .and_then(|branch| branch.as_str().ok().map(str::to_string)))
}

fn credentials() -> RemoteCallbacks<'static> {
    let mut callbacks = RemoteCallbacks::new();
    let mut attempts = 0;
    callbacks.credentials(move |_url, username, allowed| {
        // libgit2 asks again after every rejected credential; one offer of each kind is enough.
        attempts += 1;
        if attempts > 3 {
            return Err(git2::Error::from_str("authentication failed"));
        }
        if allowed.contains(CredentialType::USERNAME) {
            return Cred::username(username.unwrap_or("git"));
        }
        if allowed.contains(CredentialType::SSH_KEY) {
            return Cred::ssh_key_from_agent(username.unwrap_or("git"));
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && let Ok(token) = std::env::var("FLEETFORM_GIT_TOKEN")
        {
            let user = std::env::var("FLEETFORM_GIT_USERNAME").unwrap_or_else(|_| "x-access-token".to_string());
            return Cred::userpass_plaintext(&user, &token);
        }
        Err(git2::Error::from_str(
            "the server asks for credentials: set FLEETFORM_GIT_TOKEN for https, or load a key into ssh-agent for ssh",
        ))
    });
    callbacks
}

/// What a ref resolved to: the object it names (an annotated tag stays a tag, for its
/// signature) and the commit that object leads to.
struct Target<'r> {
    object: git2::Object<'r>,
    commit: Oid,
}

/// Resolves a ref to a commit: the candidates first (remote-tracking names), then anything
/// `git rev-parse` understands.
fn resolve<'r>(
    repo: &'r Repository,
    git_ref: &str,
    candidates: &[String],
    location: &str,
) -> Result<Target<'r>, SourceError> {
    let by_name = candidates
        .iter()
        .filter(|name| !name.is_empty())
        .find_map(|name| repo.find_reference(name).ok());
    let object = match by_name {
        // The object the ref points at itself: peeling would skip an annotated tag.
        Some(reference) => reference
            .resolve()
            .ok()
            .and_then(|r| r.target())
            .and_then(|id| repo.find_object(id, None).ok()),
        None => repo.revparse_single(git_ref).ok(),
    };
    let target = object.and_then(|object| {
        let commit = object.peel(ObjectType::Commit).ok()?.id();
        Some(Target { object, commit })
    });
    target.ok_or_else(|| {
        let mut branches: Vec<String> = repo
            .references()
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|r| {
                r.shorthand()
                    .ok()
                    .map(|s| s.trim_start_matches("origin/").to_string())
            })
            .filter(|name| name != "HEAD")
            .collect();
        branches.sort();
        branches.dedup();
        let hint = did_you_mean(git_ref, branches.iter().map(String::as_str));
        branches.truncate(10);
        let known = if branches.is_empty() {
            String::new()
        } else {
            format!(" (known refs: {})", branches.join(", "))
        };
        SourceError::UnknownRef {
            repository: location.to_string(),
            git_ref: git_ref.to_string(),
            hint,
            known,
        }
    })
}

/// Checks the signature the source requires, then reads the fleet from the commit's tree.
fn read_commit(
    repo: &Repository,
    target: &Target<'_>,
    spec: &SourceSpec,
    git_ref: &str,
    fleet_path: &str,
) -> Result<Snapshot, SourceError> {
    let location = spec.location.as_str();
    let signed_by = match &spec.verify {
        Some(verification) => {
            let keys = verification.keys.load()?;
            let signer = super::signature::verify(
                repo,
                &target.object,
                target.commit,
                git_ref,
                verification.mode,
                &keys,
            )
            .map_err(|error| SourceError::Signature {
                location: location.to_string(),
                error: Box::new(error),
            })?;
            Some(signer)
        }
        None => None,
    };
    let commit = repo
        .find_commit(target.commit)
        .map_err(|err| git_error(location, err))?;
    let tree = commit.tree().map_err(|err| git_error(location, err))?;
    let root = if fleet_path.is_empty() {
        tree
    } else {
        let bad_path = |problem: &str| SourceError::BadPath {
            location: location.to_string(),
            path: fleet_path.to_string(),
            problem: format!("{problem} in commit {}", commit.id()),
        };
        let entry = tree
            .get_path(Path::new(fleet_path))
            .map_err(|_| bad_path("does not exist"))?;
        entry
            .to_object(repo)
            .ok()
            .and_then(|object| object.into_tree().ok())
            .ok_or_else(|| bad_path("is not a directory"))?
    };
    let mut walk = TreeWalk {
        repo,
        root: &root,
        ancestors: Vec::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    walk.tree(&root, "", 0);
    walk.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Snapshot {
        origin: Origin::Git {
            repository: location.to_string(),
            git_ref: git_ref.to_string(),
            commit: commit.id().to_string(),
            path: fleet_path.to_string(),
            subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                .into_owned(),
            signed_by,
        },
        files: walk.files,
        problems: walk.problems,
    })
}

struct TreeWalk<'r> {
    repo: &'r Repository,
    /// The fleet root: symlinks may not lead outside it.
    root: &'r Tree<'r>,
    /// Trees on the path from the root to the one being read, to detect symlink loops.
    ancestors: Vec<Oid>,
    files: Vec<FleetFile>,
    problems: Vec<Diagnostic>,
}

impl TreeWalk<'_> {
    fn problem(&mut self, path: &str, message: impl Into<String>) {
        self.problems
            .push(Diagnostic::file(path, Position::START, message));
    }

    fn tree(&mut self, tree: &Tree<'_>, relative: &str, depth: usize) {
        if depth > MAX_TREE_DEPTH {
            self.problem(
                relative,
                format!("directories nest deeper than {MAX_TREE_DEPTH} levels"),
            );
            return;
        }
        if self.ancestors.contains(&tree.id()) {
            self.problem(relative, "symlink loop: this directory contains itself");
            return;
        }
        self.ancestors.push(tree.id());
        for entry in tree.iter() {
            let Ok(name) = entry.name() else {
                self.problem(relative, "file name is not valid UTF-8");
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let path = join(relative, name);
            self.entry(&entry, relative, &path, depth, 0);
        }
        self.ancestors.pop();
    }

    /// One tree entry, found at `path` (whose directory is `dir`); `hops` counts symlinks followed.
    fn entry(&mut self, entry: &TreeEntry<'_>, dir: &str, path: &str, depth: usize, hops: usize) {
        match entry.kind() {
            Some(ObjectType::Tree) => match self.repo.find_tree(entry.id()) {
                Ok(tree) => self.tree(&tree, path, depth + 1),
                Err(err) => self.problem(path, format!("cannot read tree: {}", err.message())),
            },
            Some(ObjectType::Blob) if entry.filemode() == LINK_MODE => {
                self.link(entry, dir, path, depth, hops)
            }
            Some(ObjectType::Blob) if is_fleet_file(path) => self.blob(entry.id(), path),
            // Other files and submodules are not part of the fleet.
            _ => {}
        }
    }

    fn link(&mut self, entry: &TreeEntry<'_>, dir: &str, path: &str, depth: usize, hops: usize) {
        let Ok(blob) = self.repo.find_blob(entry.id()) else {
            self.problem(path, "cannot read symlink");
            return;
        };
        let Ok(target) = std::str::from_utf8(blob.content()) else {
            self.problem(path, "symlink target is not valid UTF-8");
            return;
        };
        let Some(resolved) = resolve_link(dir, target) else {
            self.problem(
                path,
                format!("symlink leads outside the fleet root (to {target})"),
            );
            return;
        };
        if hops >= MAX_LINK_HOPS {
            self.problem(path, "too many levels of symlinks");
            return;
        }
        let target_entry = if resolved.is_empty() {
            None
        } else {
            self.root.get_path(Path::new(&resolved)).ok()
        };
        let Some(target_entry) = target_entry else {
            if resolved.is_empty() {
                self.problem(path, "symlink points at the fleet root itself");
            } else if is_fleet_file(path) {
                self.problem(path, format!("broken symlink (to {target})"));
            }
            return;
        };
        let target_dir = resolved.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
        if target_entry.filemode() == LINK_MODE {
            // A link to a link: the next target is relative to where that link lives.
            self.link(&target_entry, target_dir, path, depth, hops + 1);
        } else {
            self.entry(&target_entry, target_dir, path, depth, hops + 1);
        }
    }

    fn blob(&mut self, id: Oid, path: &str) {
        let size = self
            .repo
            .odb()
            .and_then(|odb| odb.read_header(id))
            .map(|(size, _)| size as u64)
            .unwrap_or(0);
        if size > MAX_FILE_SIZE {
            self.problem(
                path,
                format!("file is {size} bytes, larger than the 1 MiB limit"),
            );
            return;
        }
        match self.repo.find_blob(id) {
            Ok(blob) => self.files.push(FleetFile {
                path: path.to_string(),
                content: blob.content().to_vec(),
            }),
            Err(err) => self.problem(path, format!("cannot read file: {}", err.message())),
        }
    }
}

fn git_error(location: &str, err: git2::Error) -> SourceError {
    SourceError::Git {
        location: location.to_string(),
        message: err.message().to_string(),
    }
}

fn fetch_error(url: &str, err: git2::Error) -> SourceError {
    SourceError::Fetch {
        url: url.to_string(),
        message: err.message().to_string(),
    }
}

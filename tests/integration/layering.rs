//! The layers of `src/` as rules on its source text: decisions are pure (no API client, no
//! async runtime, no clock), components reach each other only through `api` (the wire vocabulary) and
//! `runtime` (the shared machinery), and those two depend on no component.
//!
//! Only the code a file ships counts: comments and its `#[cfg(test)]` module are left out, since
//! a test may build one side of a protocol to check the other side accepts it.
//!
//! The embedded control plane's layers (ARCHITECTURE.md, "The layers of the control plane") are
//! its own crate's to keep: `crates/controlplane/tests/api/layering.rs` fails on any import circle
//! between its modules.

use std::path::{Path, PathBuf};

/// Files that decide and must not act: facts and time in, decisions out.
const DECISION_MODULES: &[&str] = &[
    "src/reconciler/lifecycle.rs",
    "src/reconciler/hub_lifecycle.rs",
    "src/reconciler/cluster_sync.rs",
    "src/reconciler/install.rs",
    "src/reconciler/tokens.rs",
    "src/hub/lease.rs",
    "src/hub/approval.rs",
    "src/hub/observer.rs",
    "src/hub/acceptance.rs",
    "src/hub/signing.rs",
    "src/agent/availability.rs",
    "src/agent/claims.rs",
    "src/agent/addon_health.rs",
    "src/agent/addon_secret.rs",
    "src/agent/rotation.rs",
    "src/agent/hub_identity.rs",
    "src/agent/day2_decision.rs",
    "src/sync/status.rs",
];

/// Folders whose every file is a decision module (or describes objects without acting).
const DECISION_FOLDERS: &[&str] = &["src/plan", "src/fleet", "src/api", "src/rollout"];

/// What a decision module must not name: a way to reach a cluster, the async runtime, or the
/// clock (the time comes in as an argument).
const NOT_IN_DECISIONS: &[&str] = &[
    "kube::Api",
    "kube::Client",
    "Api",
    "Client",
    "tokio",
    "Timestamp::now",
    "SystemTime::now",
    "Instant::now",
];

/// `(folder, what no file in it may name)`: who must not reach whom.
const FORBIDDEN_IMPORTS: &[(&str, &[&str])] = &[
    ("src/agent", &["crate::hub"]),
    ("src/reconciler", &["crate::hub"]),
    ("src/hub", &["crate::agent"]),
    ("src/up", &["crate::cli"]),
    (
        "src/runtime",
        &[
            "crate::agent",
            "crate::hub",
            "crate::reconciler",
            "crate::sync",
            "crate::up",
            "crate::cli",
        ],
    ),
    (
        "src/api",
        &[
            "crate::runtime",
            "crate::agent",
            "crate::hub",
            "crate::reconciler",
            "crate::sync",
            "crate::up",
            "crate::cli",
        ],
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `folder`, sorted.
fn rust_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The shipped code of a file, line by line (numbered from 1): up to its `#[cfg(test)]`
/// module, without comments.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .map(|(index, line)| (index + 1, without_comment(line).to_string()))
        .filter(|(_, line)| !line.trim().is_empty())
        .collect()
}

/// `line` without a `//` comment (one outside a string literal).
fn without_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if !in_string && previous == '/' => return &line[..at - 1],
            _ => {}
        }
        previous = c;
    }
    line
}

/// Whether `code` names `word` as a whole path or identifier (`Api` is not in `ApiError`).
fn names(code: &str, word: &str) -> bool {
    let identifier = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(identifier) && !after.is_some_and(identifier)
    })
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Each line of `files` naming one of `words`, as `file:line: word: code`.
fn violations(files: &[PathBuf], words: &[&str]) -> Vec<String> {
    files
        .iter()
        .flat_map(|file| {
            code_lines(file)
                .into_iter()
                .flat_map(move |(number, code)| {
                    words
                        .iter()
                        .filter(|word| names(&code, word))
                        .map(|word| format!("{}:{number}: {word}: {}", relative(file), code.trim()))
                        .collect::<Vec<_>>()
                })
        })
        .collect()
}

#[test]
fn decision_modules_reach_no_cluster_and_do_not_run_async() {
    let root = root();
    let mut files: Vec<PathBuf> = DECISION_MODULES
        .iter()
        .map(|path| root.join(path))
        .collect();
    for path in &files {
        assert!(
            path.is_file(),
            "{} is listed as a decision module but does not exist: update DECISION_MODULES",
            relative(path)
        );
    }
    for folder in DECISION_FOLDERS {
        files.extend(rust_files(&root.join(folder)));
    }
    let found = violations(&files, NOT_IN_DECISIONS);
    assert!(
        found.is_empty(),
        "decision modules must take facts and return decisions; the loops reach clusters and wait:\n{}",
        found.join("\n")
    );
}

#[test]
fn components_reach_each_other_only_through_api_and_runtime() {
    let root = root();
    let found: Vec<String> = FORBIDDEN_IMPORTS
        .iter()
        .flat_map(|(folder, words)| violations(&rust_files(&root.join(folder)), words))
        .collect();
    assert!(
        found.is_empty(),
        "what two components share belongs in `api` (wire vocabulary) or `runtime` (machinery):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rules_see_code_and_skip_comments_and_tests() {
    assert_eq!(without_comment("let a = 1; // tokio"), "let a = 1; ");
    assert_eq!(
        without_comment(r#"let url = "http://x"; "#),
        r#"let url = "http://x"; "#
    );
    assert!(names("use kube::{Api, Client};", "Api"));
    assert!(names("use kube::{Api, Client};", "Client"));
    assert!(!names("kube::Error::Api(status) => ApiError", "Client"));
    assert!(!names("struct ApiError;", "Api"));
    assert!(names("use crate::hub::conditions;", "crate::hub"));
    assert!(!names("use crate::hubs;", "crate::hub"));
}

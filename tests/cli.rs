//! `fleetform validate` and `fleetform crds` as a user runs them: exit codes, output formats and
//! sources (directories, local repositories, URLs at a ref).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fleetform(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .args(args)
        .env("FLEETFORM_CACHE_DIR", cache)
        .env_remove("RUST_LOG")
        .output()
        .expect("run fleetform")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo")
}

/// A git repository holding the example fleet under `fleet/`, with a `v1` tag on the first
/// commit and a second commit on `main` that breaks a spoke.
struct FleetRepo {
    dir: tempfile::TempDir,
    first: String,
    second: String,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn commit_all(repo: &git2::Repository, message: &str) -> git2::Oid {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let author = git2::Signature::now("test", "test@example.com").unwrap();
    let parents: Vec<git2::Commit> = repo
        .head()
        .ok()
        .and_then(|head| head.peel_to_commit().ok())
        .into_iter()
        .collect();
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &author, &author, message, &tree, &parents)
        .unwrap()
}

fn fleet_repo() -> FleetRepo {
    let dir = tempfile::tempdir().unwrap();
    let mut init = git2::RepositoryInitOptions::new();
    init.initial_head("main");
    let repo = git2::Repository::init_opts(dir.path(), &init).unwrap();
    copy_dir(&example(), &dir.path().join("fleet"));
    let first = commit_all(&repo, "example fleet");
    repo.tag_lightweight("v1", &repo.find_object(first, None).unwrap(), false)
        .unwrap();
    let spoke = dir.path().join("fleet/spokes/edge.yaml");
    let text = std::fs::read_to_string(&spoke)
        .unwrap()
        .replace("leaseDurationSeconds: 10", "leaseDurationSeconds: 0");
    std::fs::write(&spoke, text).unwrap();
    let second = commit_all(&repo, "break dev");
    FleetRepo {
        dir,
        first: first.to_string(),
        second: second.to_string(),
    }
}

#[test]
fn the_example_fleet_validates_clean() {
    let cache = tempfile::tempdir().unwrap();
    let output = fleetform(&["validate", example().to_str().unwrap()], cache.path());
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("valid: 1 hub, 4 spokes, 3 addons"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_repository_url_at_a_ref_is_read_at_that_commit_and_prints_its_sha() {
    let repo = fleet_repo();
    let cache = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.dir.path().display());

    let at_tag = fleetform(
        &["validate", &url, "--ref", "v1", "--path", "fleet"],
        cache.path(),
    );
    assert_eq!(at_tag.status.code(), Some(0), "{}", stdout(&at_tag));
    assert!(
        stdout(&at_tag).contains(&format!("commit {}", repo.first)),
        "{}",
        stdout(&at_tag)
    );

    let at_main = fleetform(
        &["validate", &url, "--path", "fleet", "-o", "json"],
        cache.path(),
    );
    assert_eq!(at_main.status.code(), Some(1), "{}", stdout(&at_main));
    let report: serde_json::Value = serde_json::from_slice(&at_main.stdout).unwrap();
    assert_eq!(report["source"]["commit"], repo.second.as_str());
    assert_eq!(report["source"]["ref"], "main");
    assert_eq!(report["valid"], false);
    assert_eq!(report["errors"][0]["file"], "spokes/edge.yaml");
    assert_eq!(report["errors"][0]["pointer"], "/spec/leaseDurationSeconds");
    assert_eq!(report["errors"][0]["line"], 13);

    let by_sha = fleetform(
        &[
            "validate",
            &url,
            "--ref",
            &repo.first[..10],
            "--path",
            "fleet",
        ],
        cache.path(),
    );
    assert_eq!(by_sha.status.code(), Some(0), "{}", stdout(&by_sha));
}

#[test]
fn a_local_repository_is_pinned_to_head_until_it_has_uncommitted_changes() {
    let repo = fleet_repo();
    let cache = tempfile::tempdir().unwrap();
    let fleet = repo.dir.path().join("fleet");
    let clean = fleetform(&["validate", fleet.to_str().unwrap()], cache.path());
    assert!(
        stdout(&clean).contains(&format!("commit {}", repo.second)),
        "{}",
        stdout(&clean)
    );

    let spoke = fleet.join("spokes/edge.yaml");
    let fixed = std::fs::read_to_string(&spoke)
        .unwrap()
        .replace("leaseDurationSeconds: 0", "leaseDurationSeconds: 10");
    std::fs::write(&spoke, fixed).unwrap();
    let dirty = fleetform(&["validate", fleet.to_str().unwrap()], cache.path());
    assert_eq!(dirty.status.code(), Some(0), "{}", stdout(&dirty));
    assert!(
        stdout(&dirty).contains("uncommitted changes"),
        "{}",
        stdout(&dirty)
    );

    let at_ref = fleetform(
        &["validate", fleet.to_str().unwrap(), "--ref", "v1"],
        cache.path(),
    );
    assert!(
        stdout(&at_ref).contains(&format!("commit {}", repo.first)),
        "{}",
        stdout(&at_ref)
    );
}

#[test]
fn bad_sources_fail_with_one_line_naming_what_and_where() {
    let repo = fleet_repo();
    let cache = tempfile::tempdir().unwrap();
    let url = format!("file://{}", repo.dir.path().display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![url.clone(), "--ref".into(), "nope".into()],
            "unknown ref \"nope\"",
        ),
        (
            vec![url.clone(), "--path".into(), "missing".into()],
            "fleet path \"missing\" does not exist in commit",
        ),
        (
            vec![url.clone(), "--path".into(), "../x".into()],
            "leads outside the source",
        ),
        (
            vec!["/nonexistent/fleet".into()],
            "/nonexistent/fleet: no such file, directory or repository",
        ),
        (
            vec!["http://127.0.0.1:1/fleet.git".into()],
            "cannot fetch http://127.0.0.1:1/fleet.git",
        ),
        (
            vec![
                example().display().to_string(),
                "--ref".into(),
                "zzz-no-such-ref".into(),
            ],
            "unknown ref \"zzz-no-such-ref\"",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["validate".to_string()];
        all.extend(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let output = fleetform(&all, cache.path());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{all:?}: {stderr}");
        assert!(stderr.contains(expected), "{all:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{all:?}: {stderr}");
    }
}

#[test]
fn usage_errors_exit_with_invalid_input() {
    let cache = tempfile::tempdir().unwrap();
    let output = fleetform(&["validate", "--output", "html"], cache.path());
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn crds_in_deploy_are_what_fleetform_crds_prints() {
    let cache = tempfile::tempdir().unwrap();
    let output = fleetform(&["crds"], cache.path());
    assert_eq!(output.status.code(), Some(0));
    let printed = stdout(&output);
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&deploy)
        .expect("deploy/crds exists")
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 10, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            printed.contains(text.trim()),
            "{} is stale: regenerate with `fleetform crds --out-dir deploy/crds`",
            file.display()
        );
    }
}

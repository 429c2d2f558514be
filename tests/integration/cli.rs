//! The command line as a user runs it, without clusters: exit codes, output formats, sources
//! (directories, local repositories, URLs at a ref, the default), logging, closed pipes and
//! shell completion.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `fleetform ARGS` with nothing from the test's environment that would change what it does.
fn command(args: &[&str], cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fleetform"));
    command
        .args(args)
        .env("FLEETFORM_CACHE_DIR", cache)
        .env_remove("RUST_LOG")
        .env_remove("FLEETFORM_LOG")
        .env_remove("FLEETFORM_SOURCE")
        .env_remove("NO_COLOR");
    command
}

fn fleetform(args: &[&str], cache: &Path) -> Output {
    command(args, cache).output().expect("run fleetform")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
        (
            vec![url.clone(), "--ref".into(), "mian".into()],
            "unknown ref \"mian\"; did you mean \"main\"? (known refs: main, v1)",
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

#[test]
fn every_command_that_reads_a_fleet_takes_fleetform_source_else_the_current_directory() {
    let cache = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    // Each stops at reading its source, before it reaches or starts any cluster.
    for name in ["validate", "plan", "apply", "status", "up"] {
        let output = command(&[name], cache.path())
            .current_dir(empty.path())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        // `up` follows commits, so a plain directory is refused before it is read.
        let expected = if name == "up" {
            "error: .: not in a git repository"
        } else {
            "error: no fleet documents under ."
        };
        assert!(
            stderr(&output).contains(expected),
            "{name}: {}",
            stderr(&output)
        );
    }
    let from_env = command(&["validate"], cache.path())
        .current_dir(empty.path())
        .env("FLEETFORM_SOURCE", example())
        .output()
        .unwrap();
    assert_eq!(from_env.status.code(), Some(0), "{}", stderr(&from_env));
    assert!(stdout(&from_env).contains("valid: 1 hub, 4 spokes, 3 addons"));
}

#[test]
fn a_source_without_fleet_documents_is_an_error_unless_allowed() {
    let cache = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("README.md"), "not a fleet document").unwrap();
    let dir = empty.path().to_str().unwrap();

    let refused = fleetform(&["validate", dir], cache.path());
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        stderr(&refused).trim_end(),
        format!("error: no fleet documents under {dir}; --allow-empty accepts an empty fleet")
    );
    let as_json = fleetform(&["validate", dir, "-o", "json"], cache.path());
    let report: serde_json::Value = serde_json::from_slice(&as_json.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("no fleet documents")
    );

    let allowed = fleetform(&["validate", dir, "--allow-empty"], cache.path());
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert!(stdout(&allowed).contains("valid: 0 hubs, 0 spokes, 0 addons"));

    // An empty fleet names no hub: its plan reaches no cluster and changes nothing.
    let planned = fleetform(&["plan", dir, "--allow-empty", "-o", "yaml"], cache.path());
    assert_eq!(planned.status.code(), Some(0), "{}", stderr(&planned));
    let plan: serde_json::Value = serde_yaml::from_slice(&planned.stdout).unwrap();
    assert_eq!(plan["formatVersion"], "1");
    assert_eq!(plan["summary"]["create"], 0);
    assert_eq!(plan["hubs"], serde_json::json!([]));
}

#[test]
fn a_missing_name_says_that_name_is_required() {
    let cache = tempfile::tempdir().unwrap();
    let fleet = tempfile::tempdir().unwrap();
    std::fs::write(
        fleet.path().join("hub.yaml"),
        "apiVersion: fleetform.io/v1alpha1\nkind: Hub\nmetadata:\n  labels: {tier: core}\nspec:\n  kubeconfig: {embedded: {}}\n",
    )
    .unwrap();
    let output = fleetform(&["validate", fleet.path().to_str().unwrap()], cache.path());
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("hub.yaml:4:3: /metadata/name: name is required"),
        "{}",
        stdout(&output)
    );
}

/// Runs `fleetform ARGS` with a stdout whose reader has gone, as `fleetform ... | head` leaves
/// it once `head` has read enough.
fn with_closed_stdout(args: &[&str], cache: &Path) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    command(args, cache)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_the_output_quietly_with_the_commands_exit_code() {
    let cache = tempfile::tempdir().unwrap();
    let example = example();
    let example = example.to_str().unwrap();
    let invalid =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/many-errors-in-one-repo");
    let cases: [(&[&str], i32); 5] = [
        (&["validate", example, "-o", "json"], 0),
        (&["validate", example, "-o", "yaml"], 0),
        (&["validate", invalid.to_str().unwrap()], 1),
        (&["crds"], 0),
        (&["completion", "zsh"], 0),
    ];
    for (args, code) in cases {
        let output = with_closed_stdout(args, cache.path());
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

#[test]
fn log_overrides_rust_log_and_logs_are_plain_text_off_a_terminal() {
    let cache = tempfile::tempdir().unwrap();
    let example = example();
    let validate = ["validate", example.to_str().unwrap()];
    let logged = command(&validate, cache.path())
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(
        stderr(&logged).contains("DEBUG fleetform::source: read the fleet source"),
        "{}",
        stderr(&logged)
    );
    assert!(!stderr(&logged).contains('\x1b'), "{:?}", stderr(&logged));

    let overridden = command(&["--log", "warn", validate[0], validate[1]], cache.path())
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert_eq!(overridden.status.code(), Some(0));
    assert_eq!(stderr(&overridden), "");

    let bad = fleetform(&["--log", "fleetform=[", "crds"], cache.path());
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("not a log filter"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    let cache = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _fleetform"),
        ("zsh", "#compdef fleetform"),
        ("fish", "complete -c fleetform"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[fleetform]"),
    ] {
        let output = fleetform(&["completion", shell], cache.path());
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = stdout(&output);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("allow-empty"),
            "{shell}: flags are completed"
        );
    }
}

#[test]
fn a_saved_plan_of_another_format_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("plan.json");
    let source = serde_json::json!({"type": "directory", "path": ".", "uncommittedChanges": false});
    for (document, found) in [
        (
            serde_json::json!({"formatVersion": "2", "source": source, "hubs": []}),
            "format 2",
        ),
        (
            serde_json::json!({"source": source, "hubs": []}),
            "format (none)",
        ),
    ] {
        std::fs::write(&saved, document.to_string()).unwrap();
        let output = fleetform(&["apply", saved.to_str().unwrap()], cache.path());
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains(&format!(
                "{found}, but this fleetform reads format 1: plan again"
            )),
            "{}",
            stderr(&output)
        );
    }
}

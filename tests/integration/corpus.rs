//! The broken fleet repos under `tests/corpus/`: each must give exactly the errors in its
//! `expected.txt`, whether read from a directory or from a git commit.
//!
//! After an intended change of wording, `FLEETFORM_BLESS=1 cargo test --test integration corpus::` rewrites the
//! expected files; review the diff before committing it.

use std::fs;
use std::path::{Path, PathBuf};

use fleetform::fleet::{self, Diagnostic};
use fleetform::source::{self, SourceSpec};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    cases
}

/// Every problem of a snapshot, as `fleetform validate` prints them.
fn errors(snapshot: source::Snapshot) -> Vec<String> {
    let mut diagnostics: Vec<Diagnostic> = snapshot.problems;
    if let Err(found) = fleet::load(&snapshot.files) {
        diagnostics.extend(found);
    }
    diagnostics.sort();
    diagnostics.iter().map(ToString::to_string).collect()
}

/// Copies a case into a fresh git repository (symlinks stay symlinks) and commits it.
fn commit_copy(case: &Path, into: &Path) -> git2::Oid {
    copy_tree(case, into);
    let repo = git2::Repository::init(into).expect("init");
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("find tree");
    let author = git2::Signature::now("corpus", "corpus@example.com").expect("signature");
    repo.commit(Some("HEAD"), &author, &author, "case", &tree, &[])
        .expect("commit")
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read case") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_symlink() {
            let link = fs::read_link(entry.path()).expect("read link");
            std::os::unix::fs::symlink(link, &target).expect("symlink");
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "expected.txt" {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn every_broken_repo_gives_its_expected_errors_from_a_directory_and_from_git() {
    let cases = cases();
    assert!(
        cases.len() >= 30,
        "the corpus holds {} cases, at least 30 are wanted",
        cases.len()
    );
    let bless = std::env::var_os("FLEETFORM_BLESS").is_some();
    let mut failures = Vec::new();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let from_directory = errors(source::read_directory(&case).expect("read case directory"));
        assert!(
            !from_directory.is_empty(),
            "{name}: a broken repo validated clean"
        );

        let expected_path = case.join("expected.txt");
        if bless {
            fs::write(&expected_path, from_directory.join("\n") + "\n").expect("bless");
        }
        let expected: Vec<String> = fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{name}: missing expected.txt"))
            .lines()
            .map(str::to_string)
            .collect();
        if from_directory != expected {
            failures.push(format!(
                "{name} (directory):\n  expected {expected:#?}\n  got {from_directory:#?}"
            ));
        }

        let repo = tempfile::tempdir().expect("tempdir");
        let commit = commit_copy(&case, repo.path());
        let snapshot = source::read(&SourceSpec {
            location: repo.path().display().to_string(),
            ..SourceSpec::default()
        })
        .expect("read case from git");
        assert_eq!(
            snapshot.origin.commit(),
            Some(commit.to_string().as_str()),
            "{name}"
        );
        let from_git = errors(snapshot);
        if from_git != expected {
            failures.push(format!(
                "{name} (git):\n  expected {expected:#?}\n  got {from_git:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_error_names_file_line_and_column() {
    for case in cases() {
        for line in errors(source::read_directory(&case).expect("read case")) {
            let mut parts = line.splitn(4, ':');
            let (file, row, column) = (parts.next(), parts.next(), parts.next());
            assert!(
                file.is_some_and(|f| f.ends_with(".yaml")
                    || f.ends_with(".yml")
                    || !f.contains('.')),
                "{line}"
            );
            assert!(
                row.and_then(|r| r.parse::<usize>().ok())
                    .is_some_and(|r| r >= 1),
                "{line}"
            );
            assert!(
                column
                    .and_then(|c| c.parse::<usize>().ok())
                    .is_some_and(|c| c >= 1),
                "{line}"
            );
        }
    }
}

#[test]
fn files_over_one_mebibyte_are_refused_unread_from_a_directory_and_from_git() {
    let case = tempfile::tempdir().expect("tempdir");
    let mut big =
        String::from("apiVersion: fleetform.io/v1alpha1\nkind: AddOn\nmetadata:\n  name: big\n");
    while big.len() <= 1024 * 1024 {
        big.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    fs::write(case.path().join("big.yaml"), &big).expect("write");
    let size = big.len();
    let expected = vec![format!(
        "big.yaml:1:1: file is {size} bytes, larger than the 1 MiB limit"
    )];

    assert_eq!(
        errors(source::read_directory(case.path()).expect("read")),
        expected
    );

    let repo = tempfile::tempdir().expect("tempdir");
    commit_copy(case.path(), repo.path());
    let snapshot = source::read(&SourceSpec {
        location: repo.path().display().to_string(),
        ..SourceSpec::default()
    })
    .expect("read from git");
    assert_eq!(errors(snapshot), expected);
}

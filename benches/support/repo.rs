//! The fleet repo a benchmark commits to and starts `up` from.

/// Commits the work tree of `repo` with `message`; returns the commit's id.
pub fn commit(repo: &git2::Repository, message: &str) -> Result<String, git2::Error> {
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let signature = git2::Signature::now("bench", "bench@example.com")?;
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let id = repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )?;
    Ok(id.to_string())
}

/// The fleet the files under `dir` declare, as `up` loads it.
pub fn load(dir: &std::path::Path) -> Result<fleetform::fleet::Fleet, String> {
    let (_, fleet) = fleetform::source::load_fleet(&fleetform::source::SourceSpec {
        location: dir.display().to_string(),
        ..Default::default()
    })
    .map_err(|err| format!("the fleet: {err:?}"))?;
    Ok(fleet)
}
